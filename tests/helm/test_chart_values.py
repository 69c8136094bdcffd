"""The chart's values: lint and render for the defaults and every ``ci/`` file, validation of
every rendered manifest against a current Kubernetes, and the schema's refusals of bad values."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
from helm_chart import CHART, Rendered, chart_copy, helm, notes, render
from helm_settings_schema import SECRETS

CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
KUBERNETES_VERSION = "1.37.0"
# Custom resources that kubernetes-validate has no schema for (checked by their own tests).
NOT_IN_KUBERNETES = {"ServiceMonitor", "PrometheusRule"}


def test_there_are_ci_values_for_each_deployment_shape() -> None:
    assert {path.stem for path in CI_VALUES} >= {
        "single-node",
        "s3-tier2",
        "auth-on",
        "metrics-on",
        "resources-persistence",
        "jetstream-tier1",
        "cluster-s3",
    }


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda v: v.stem if v else "defaults")
def test_lint_strict_passes(values: Path | None) -> None:
    answer = helm("lint", "--strict", str(CHART), *(["-f", str(values)] if values else []))
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "0 chart(s) failed" in answer.stdout


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda v: v.stem if v else "defaults")
def test_every_rendered_manifest_validates_strictly(values: Path | None) -> None:
    rendered = render(*([values] if values else []))
    kinds = {m["kind"] for m in rendered.manifests}
    assert {"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget"} <= kinds
    for manifest in rendered.manifests:
        if manifest["kind"] in NOT_IN_KUBERNETES:
            continue
        # raises ValidationError naming the field on any unknown or mistyped property
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "unknownKey=1"], "Additional property unknownKey is not allowed"),
        (["--set", "config.store.bogus_bytes=1"], "Additional property bogus_bytes is not allowed"),
        (["--set", "replicas=-1"], "replicas: Must be greater than or equal to 1"),
        # several nodes need cluster mode, and cluster mode JetStream and a shared Tier 2
        (["--set", "replicas=3"], "config.cluster.enabled must be one of the following: true"),
        (
            ["--set", "config.cluster.enabled=true"],
            'config.tier1.mode must be one of the following: "jetstream"',
        ),
        (
            ["--set", "config.cluster.enabled=true,config.tier1.mode=jetstream"],
            "config.tier2.uri: Does not match pattern",
        ),
        (["--set", "clusterDomain=Not_A_Domain"], "clusterDomain: Does not match pattern"),
        (["--set-string", "replicas=2"], "replicas: Invalid type. Expected: integer"),
        (
            ["--set-string", "config.store.containers=four"],
            "config.store.containers: Invalid type. Expected: integer, given: string",
        ),
        (["--set", "config.cache.block_bytes=100"], "block_bytes: Must be greater than or equal"),
        (["--set", "config.tier1.mode=nfs"], "config.tier1.mode"),
        (["--set", "auth.tokens.t1=root"], "auth.tokens.t1"),
        (["--set", "persistence.size=lots"], "persistence.size: Does not match pattern"),
    ],
)
def test_the_schema_refuses_bad_values_with_a_clear_message(flags: list[str], message: str) -> None:
    answer = helm("template", "demo", str(CHART), *flags)
    assert answer.returncode != 0
    assert "values don't meet the specifications of the schema" in answer.stderr
    assert message in answer.stderr, answer.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--set", "config.tier2.options.secret_key=x"],
            "config.tier2.options.secret_key would put an S3 key in a ConfigMap",
        ),
        (["--set", "tier2Credentials.accessKey=x"], "give both accessKey and secretKey"),
    ],
)
def test_the_templates_refuse_what_the_schema_cannot_say(flags: list[str], message: str) -> None:
    answer = helm("template", "demo", str(CHART), *flags)
    assert answer.returncode != 0
    assert message in answer.stderr, answer.stderr


@pytest.mark.parametrize("setting", sorted(SECRETS))
def test_a_secret_setting_is_refused_in_config_saying_where_it_goes(setting: str) -> None:
    # Every setting that holds a secret, derived from the settings tree's list: the chart must
    # name the Secret-backed value that takes it instead.
    value = "admin" if setting == "auth.tokens" else "0123456789abcdef0123"
    key = f"config.{setting}.t0ken" if setting == "auth.tokens" else f"config.{setting}"
    answer = helm("template", "demo", str(CHART), "--set", f"{key}={value}")
    assert answer.returncode != 0
    assert f"config.{setting} would put a secret in a ConfigMap: " in answer.stderr, answer.stderr
    assert value not in answer.stderr
    elsewhere = {
        "auth": "auth.existingSecret",
        "tier1": "jetstreamCredentials",
        "cluster": "clusterSecret",
    }
    assert elsewhere[setting.split(".")[0]] in answer.stderr


def test_names_and_labels_follow_the_common_conventions() -> None:
    rendered = render(release="prod")
    for manifest in rendered.manifests:
        labels = manifest["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "segmentstore"
        assert labels["app.kubernetes.io/instance"] == "prod"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert manifest["metadata"]["name"].startswith("prod-segmentstore")
    statefulset = rendered.one("StatefulSet")
    headless = rendered.one("Service", "prod-segmentstore-headless")
    assert statefulset["spec"]["serviceName"] == headless["metadata"]["name"]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    client = rendered.one("Service", "prod-segmentstore")
    assert client["spec"]["ports"][0]["targetPort"] == "http"
    selector = statefulset["spec"]["selector"]["matchLabels"]
    for service in (headless, client):
        assert service["spec"]["selector"] == selector


def test_notes_tell_how_to_reach_the_service(tmp_path: Path) -> None:
    text = notes(tmp_path, "prod", "--namespace", "streams")
    assert "http://prod-segmentstore.streams.svc:9090" in text
    assert "prod-segmentstore-0.prod-segmentstore-headless.streams.svc:9090" in text
    assert "kubectl --namespace streams port-forward svc/prod-segmentstore 9090:9090" in text
    assert "http://127.0.0.1:9090/ui/" in text


def _kinds(rendered: Rendered) -> set[str]:
    return {m["kind"] for m in rendered.manifests}


def test_optional_resources_appear_only_when_enabled() -> None:
    assert not {"ServiceMonitor", "PrometheusRule", "NetworkPolicy", "Secret"} & _kinds(render())
    assert [c["metadata"]["name"] for c in render().all("ConfigMap")] == ["demo-segmentstore"]
    assert "PodDisruptionBudget" not in _kinds(render(podDisruptionBudget__enabled="false"))
    monitored = render(CHART / "ci" / "metrics-on.yaml")
    monitor = monitored.one("ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}
    ]
    # It selects the headless Service alone: each pod is scraped once, under one job.
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() >= (
        monitored.one("StatefulSet")["spec"]["selector"]["matchLabels"].items()
    )
    selected = [
        service["metadata"]["name"]
        for service in monitored.all("Service")
        if service["metadata"]["labels"].items() >= selector.items()
    ]
    assert selected == ["demo-segmentstore-headless"]
    policy = render(CHART / "ci" / "auth-on.yaml").one("NetworkPolicy")
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [
        {"port": 9090, "protocol": "TCP"},
        {"port": 9100, "endPort": 9355, "protocol": "TCP"},  # the workers' own
    ]
    assert {"demo-segmentstore-client": "true"} in [
        source["podSelector"]["matchLabels"] for source in rule["from"]
    ]


def test_persistence_puts_the_data_directory_on_a_claim_per_pod() -> None:
    rendered = render(CHART / "ci" / "resources-persistence.yaml")
    statefulset = rendered.one("StatefulSet")
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["storageClassName"] == "fast-ssd"
    assert claim["spec"]["resources"]["requests"]["storage"] == "200Gi"
    mounts = {m["name"]: m["mountPath"] for m in rendered.container()["volumeMounts"]}
    assert mounts["data"] == rendered.config_file()["store"]["data_dir"]
    assert rendered.container()["resources"]["limits"]["memory"] == "6Gi"
    volumes = {v["name"] for v in statefulset["spec"]["template"]["spec"]["volumes"]}
    assert "data" not in volumes  # the claim, not an emptyDir
    ephemeral = render(persistence__enabled="false").one("StatefulSet")
    assert "volumeClaimTemplates" not in ephemeral["spec"]
    assert {"name": "data", "emptyDir": {}} in ephemeral["spec"]["template"]["spec"]["volumes"]


@pytest.mark.parametrize(("installed", "asked", "refused"), [(4, 8, True), (4, 4, False)])
def test_an_upgrade_cannot_change_the_container_count(
    tmp_path: Path, installed: int, asked: int, refused: bool
) -> None:
    # On a cluster the chart looks the installed ConfigMap up; offline there is none, so a copy
    # of the chart hands the same check an installed ConfigMap that records `installed`.
    check = (
        '{{- $file := printf "store:\\n  containers: %d\\n" ' + str(installed) + " }}\n"
        '{{- $installed := dict "data" (dict "segmentstore.yaml" $file) }}\n'
        '{{- include "segmentstore.refuseChangedContainers" (list $installed .Values) }}\n'
    )
    chart = chart_copy(tmp_path, {"upgrade-check.yaml": check})
    answer = helm("template", "demo", str(chart), "--set", f"config.store.containers={asked}")
    message = f"config.store.containers is fixed at first install: it is {installed}, and cannot"
    assert (answer.returncode != 0 and message in answer.stderr) == refused, answer.stderr
    assert (answer.returncode == 0) != refused
