"""The rendered pod over the settings tree: every setting has exactly one chart value (derived
from the model, so a setting added without a chart value fails here), the probes, and the
security context."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, render, resource_field
from helm_settings_schema import (
    SECRET_FILES,
    SECRET_SETTINGS,
    SECRETS,
    config_schema,
    setting_names,
)

from segmentstore.settings import Settings

# Where a pod's defaults differ from the embedded ones, and why.
DEPLOYMENT_DEFAULTS = {
    "store.data_dir": "/var/lib/segmentstore",  # the data volume's mount
    "api.host": "0.0.0.0",  # the Services reach the pod on its own address
    "tier1.jetstream.servers": ["nats://nats:4222"],  # the official chart, as release "nats"
    "node.worker_base_port": 9100,  # ports a NetworkPolicy can name (the kernel's would not be)
}
ENV_PREFIX = "SEGMENTSTORE_"
# Every secret the chart can take, so that each one's variable is rendered.
ALL_SECRETS = {
    "auth__tokens__secret": "admin",
    "jetstreamCredentials__password": "p",
    "jetstreamCredentials__token": "t",
}
# ... and cluster mode, for the cluster secret's file and each pod's identity.
IN_A_CLUSTER = {
    **ALL_SECRETS,
    "config__cluster__enabled": "true",
    "config__tier1__mode": "jetstream",
    "config__tier2__uri": "s3://bucket/prefix",
}
# Settings of a cluster's pod that the chart sets in the environment, from the pod's name or
# the mounted cluster secret.
POD_SETTINGS = {"cluster.node_id", "cluster.advertise_url", "cluster.secret_file"}
# ... and of every pod, from its container's CPU limit unless the values set it.
FROM_CPU_LIMIT = {"node.workers"}


def _names(config: dict[str, Any], prefix: str = "") -> set[str]:
    """The dotted path of every leaf of a settings file (a dict of options is one leaf)."""
    names: set[str] = set()
    for key, value in config.items():
        if isinstance(value, dict) and f"{prefix}{key}" not in LEAF_TABLES:
            names |= _names(value, f"{prefix}{key}.")
        else:
            names.add(f"{prefix}{key}")
    return names


def _value(config: dict[str, Any], name: str) -> Any:
    for part in name.split("."):
        config = config[part]
    return config


def _settings_from_env(container: dict[str, Any]) -> set[str]:
    names = (v["name"] for v in container["env"] if v["name"].startswith(ENV_PREFIX))
    return {name[len(ENV_PREFIX) :].lower().replace("__", ".") for name in names}


# Settings whose value is a table of the user's own keys.
LEAF_TABLES = {"tier2.options", "auth.tokens"}


def test_every_setting_is_a_chart_value_and_every_chart_value_a_setting() -> None:
    rendered = render(**IN_A_CLUSTER)
    in_config = _names(rendered.config_file())
    from_env = _settings_from_env(rendered.container())
    assert in_config.isdisjoint(SECRETS), "a secret would be in the ConfigMap"
    assert from_env == set(SECRET_SETTINGS) | POD_SETTINGS | FROM_CPU_LIMIT
    # A secret passed as a file: the file's setting is in the environment, the secret nowhere.
    assert set(SECRET_FILES.values()) <= from_env and from_env.isdisjoint(SECRET_FILES)
    passed = in_config | from_env | set(SECRET_FILES)
    missing = setting_names() - passed
    unknown = passed - setting_names()
    assert not missing, f"settings without a chart value (add them to values.yaml): {missing}"
    assert not unknown, f"chart values that are no setting: {unknown}"


def test_the_values_schema_is_the_one_derived_from_the_settings_tree() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["properties"]["config"] == config_schema(), "run `make helm-schema`"


def test_the_chart_defaults_are_the_settings_defaults_but_for_the_pod_s_own() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["config"]
    model = Settings().model_dump(mode="json")
    for name in _names(values):
        expected = DEPLOYMENT_DEFAULTS.get(name, _value(model, name))
        assert _value(values, name) == expected, name


def test_the_rendered_file_is_what_print_config_prints(tmp_path: Path) -> None:
    rendered = render(**ALL_SECRETS, config__store__containers="8")
    config_file = tmp_path / "segmentstore.yaml"
    config_file.write_text(yaml.safe_dump(rendered.config_file()))
    env = {v["name"]: "s" for v in rendered.container()["env"] if "valueFrom" in v}
    env["SEGMENTSTORE_NODE__WORKERS"] = "3"  # as the kubelet passes a CPU limit of 2.5
    env["SEGMENTSTORE_AUTH__TOKENS"] = "{}"
    serve = [sys.executable, "-m", "segmentstore.cli", "serve"]
    answer = subprocess.run(
        [*serve, "--config", str(config_file), "--print-config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    assert answer.returncode == 0, answer.stderr
    printed = json.loads(answer.stdout)
    assert printed["store"]["containers"] == 8
    for name in SECRETS:
        *table, key = name.split(".")
        _value(printed, ".".join(table)).pop(key)
    expected = rendered.config_file()
    # An empty Tier 2 URI is the default, which --print-config shows resolved: the node's own
    # directory under its data directory.
    assert expected["tier2"]["uri"] == ""
    expected["tier2"]["uri"] = f"file://{expected['store']['data_dir']}/tier2"
    expected["node"]["workers"] = 3
    assert {s: k for s, k in printed.items() if k} == expected


def test_probes_point_at_healthz_and_readyz_on_the_api_port() -> None:
    rendered = render(config__api__port="9191")
    container = rendered.container()
    (port,) = container["ports"]
    assert port == {"name": "http", "containerPort": 9191, "protocol": "TCP"}
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert container[probe]["httpGet"] == {"path": path, "port": "http"}, probe
    startup = container["startupProbe"]
    # Recovery replays Tier 1 since the last checkpoint before the process answers.
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600
    pod = rendered.one("StatefulSet")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= 60


def test_the_pod_runs_unprivileged_on_a_read_only_root() -> None:
    rendered = render()
    pod = rendered.one("StatefulSet")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    container = rendered.container()
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["privileged"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    # The writable places: the data volume and /tmp; the settings are mounted read-only.
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert writable == {rendered.config_file()["store"]["data_dir"], "/tmp"}


def test_with_tls_the_probes_speak_https() -> None:
    tls = {"config__api__tls_cert_file": "/tls/tls.crt", "config__api__tls_key_file": "/tls/k"}
    container = render(**tls).container()
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS", probe
    assert "scheme" not in render().container()["readinessProbe"]["httpGet"]


@pytest.mark.parametrize(("limits", "workers"), [({"cpu": "2500m"}, "3"), ({"cpu": "4"}, "4")])
def test_a_pod_runs_a_worker_per_core_of_its_cpu_limit(
    tmp_path: Path, limits: dict[str, str], workers: str
) -> None:
    values = tmp_path / "limits.yaml"
    values.write_text(yaml.safe_dump({"resources": {"limits": limits}}))
    rendered = render(values)
    container = rendered.container()
    (variable,) = [v for v in container["env"] if v["name"] == "SEGMENTSTORE_NODE__WORKERS"]
    assert variable["valueFrom"]["resourceFieldRef"] == {
        "containerName": container["name"],
        "resource": "limits.cpu",
        "divisor": "1",
    }
    assert resource_field(rendered, variable["valueFrom"]["resourceFieldRef"]) == workers
    # Set in the values, the count is the file's, and nothing in the environment overrides it.
    chosen = render(config__node__workers="2")
    assert chosen.config_file()["node"]["workers"] == 2
    assert "SEGMENTSTORE_NODE__WORKERS" not in {v["name"] for v in chosen.container()["env"]}


def test_the_network_policy_admits_each_worker_s_own_port() -> None:
    policy = render(networkPolicy__enabled="true").one("NetworkPolicy")
    (rule,) = policy["spec"]["ingress"]
    assert {"port": 9100, "endPort": 9355, "protocol": "TCP"} in rule["ports"]
    kernel_chosen = render(networkPolicy__enabled="true", config__node__worker_base_port="0")
    (rule,) = kernel_chosen.one("NetworkPolicy")["spec"]["ingress"]
    assert rule["ports"] == [{"port": 9090, "protocol": "TCP"}]
