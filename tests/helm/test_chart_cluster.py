"""The chart in cluster mode, as rendered: several nodes only with cluster mode, JetStream and a
shared Tier 2 (refused with a message otherwise), each pod's node id its pod name and its
advertised URL its DNS name through the headless Service, a PodDisruptionBudget that keeps a
majority up, and time enough to hand the containers over on SIGTERM."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, helm, render

CLUSTER = CHART / "ci" / "cluster-s3.yaml"
# What the server needs to hand its containers over on SIGTERM (15 s) and then drain (10 s).
HAND_OVER_S = 15 + 10


def _env(rendered: Any) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = rendered.container()["env"]
    return env


def test_each_pod_is_named_by_its_pod_name_and_advertises_its_dns_name() -> None:
    rendered = render(CLUSTER, release="prod", namespace="streams")
    env = _env(rendered)
    names = [variable["name"] for variable in env]
    by_name = {variable["name"]: variable for variable in env}
    assert by_name["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert by_name["POD_NAMESPACE"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.namespace"}
    }
    assert by_name["SEGMENTSTORE_CLUSTER__NODE_ID"]["value"] == "$(POD_NAME)"
    assert by_name["SEGMENTSTORE_CLUSTER__ADVERTISE_URL"]["value"] == (
        "http://$(POD_NAME).prod-segmentstore-headless.$(POD_NAMESPACE).svc.cluster.local:9090"
    )
    # Kubernetes expands $(VAR) only from variables defined earlier in the list.
    for used in ("SEGMENTSTORE_CLUSTER__NODE_ID", "SEGMENTSTORE_CLUSTER__ADVERTISE_URL"):
        assert names.index("POD_NAME") < names.index(used)
        assert names.index("POD_NAMESPACE") < names.index(used)
    statefulset = rendered.one("StatefulSet")
    assert statefulset["spec"]["replicas"] == 3
    assert statefulset["spec"]["serviceName"] == "prod-segmentstore-headless"
    assert rendered.one("Service", "prod-segmentstore-headless")["spec"]["clusterIP"] == "None"
    # The settings file leaves both to the environment (and the secret's file likewise).
    cluster = rendered.config_file()["cluster"]
    assert cluster["enabled"] is True
    assert (cluster["node_id"], cluster["advertise_url"], cluster["secret_file"]) == ("", "", None)


def test_the_advertised_url_follows_the_cluster_domain_the_port_and_tls() -> None:
    tls = {"config__api__tls_cert_file": "/tls/tls.crt", "config__api__tls_key_file": "/tls/k"}
    rendered = render(CLUSTER, clusterDomain="corp.example", config__api__port="9443", **tls)
    (url,) = [v["value"] for v in _env(rendered) if v["name"].endswith("ADVERTISE_URL")]
    assert (
        url
        == "https://$(POD_NAME).demo-segmentstore-headless.$(POD_NAMESPACE).svc.corp.example:9443"
    )


def test_a_single_node_sets_no_cluster_identity() -> None:
    names = {variable["name"] for variable in _env(render())}
    assert not names & {"POD_NAME", "SEGMENTSTORE_CLUSTER__NODE_ID"}


@pytest.mark.parametrize(("replicas", "majority"), [(2, 2), (3, 2), (4, 3), (5, 3), (7, 4)])
def test_the_disruption_budget_keeps_a_majority_of_a_cluster_up(
    replicas: int, majority: int
) -> None:
    budget = render(CLUSTER, replicas=str(replicas)).one("PodDisruptionBudget")["spec"]
    assert budget["minAvailable"] == majority
    assert "maxUnavailable" not in budget


def test_a_single_node_s_budget_is_max_unavailable() -> None:
    for rendered in (render(), render(CLUSTER, replicas="1")):
        budget = rendered.one("PodDisruptionBudget")["spec"]
        assert budget["maxUnavailable"] == 1
        assert "minAvailable" not in budget


def test_nodes_start_in_parallel_and_have_time_to_hand_over() -> None:
    pod = render(CLUSTER).one("StatefulSet")["spec"]
    assert pod["podManagementPolicy"] == "Parallel"
    assert pod["template"]["spec"]["terminationGracePeriodSeconds"] > HAND_OVER_S


def _shared_file_tier2(tmp_path: Path, volume: dict[str, Any]) -> Path:
    values = tmp_path / "shared.yaml"
    document = {
        "replicas": 3,
        "config": {
            "cluster": {"enabled": True},
            "tier1": {"mode": "jetstream"},
            "tier2": {"uri": "file:///mnt/shared/tier2"},
        },
        "extraVolumes": [{"name": "shared", **volume}],
        "extraVolumeMounts": [{"name": "shared", "mountPath": "/mnt/shared"}],
    }
    values.write_text(yaml.safe_dump(document))
    return values


@pytest.mark.parametrize(
    "volume",
    [
        {"persistentVolumeClaim": {"claimName": "tier2-rwx"}},
        {"nfs": {"server": "nfs.example", "path": "/exports/tier2"}},
    ],
)
def test_a_file_tier2_on_a_shared_volume_makes_a_cluster(
    tmp_path: Path, volume: dict[str, Any]
) -> None:
    rendered = render(_shared_file_tier2(tmp_path, volume))
    mounts = {m["name"]: m["mountPath"] for m in rendered.container()["volumeMounts"]}
    assert mounts["shared"] == "/mnt/shared"


@pytest.fixture(scope="module")
def chart_without_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the chart without its schema: the templates' own refusals, which the schema
    otherwise answers first (a Helm that skips the schema still meets these)."""
    chart = tmp_path_factory.mktemp("chart") / "segmentstore"
    shutil.copytree(CHART, chart)
    (chart / "values.schema.json").unlink()
    yield chart


CLUSTER_ON = ["--set", "config.cluster.enabled=true"]
ON_JETSTREAM = [*CLUSTER_ON, "--set", "config.tier1.mode=jetstream"]
# A file Tier 2 under a volume no other pod sees.
ON_EMPTY_DIR = [
    "--set", "extraVolumes[0].name=scratch,extraVolumes[0].emptyDir.medium=Memory",
    "--set", "extraVolumeMounts[0].name=scratch,extraVolumeMounts[0].mountPath=/scratch",
]  # fmt: skip
ON_S3 = [*ON_JETSTREAM, "--set", "config.tier2.uri=s3://bucket/prefix"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "replicas=3"], "replicas > 1 needs cluster mode: set config.cluster.enabled"),
        (CLUSTER_ON, "config.cluster.enabled needs config.tier1.mode=jetstream (it is local)"),
        (ON_JETSTREAM, "it is empty, so each pod would keep its own Tier 2"),
        (
            [*ON_JETSTREAM, "--set", "config.tier2.uri=ftp://host/path"],
            "ftp://host/path is not a Tier 2 URI",
        ),
    ],
)
def test_the_templates_refuse_an_incomplete_cluster(
    chart_without_schema: Path, flags: list[str], message: str
) -> None:
    answer = helm("template", "demo", str(chart_without_schema), *flags)
    assert answer.returncode != 0
    assert message in answer.stderr, answer.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            [*ON_JETSTREAM, "--set", "config.tier2.uri=file:///var/lib/segmentstore/tier2"],
            "file:///var/lib/segmentstore/tier2 is on no shared volume",
        ),
        (
            [*ON_JETSTREAM, "--set", "config.tier2.uri=file:///scratch/tier2", *ON_EMPTY_DIR],
            "file:///scratch/tier2 is on no shared volume",
        ),
        (
            [*ON_S3, "--set", "config.cluster.node_id=n1"],
            "config.cluster.node_id must stay empty in a cluster: each pod's node id is its pod",
        ),
        (
            [*ON_S3, "--set", "config.cluster.advertise_url=http://n1:9090"],
            "config.cluster.advertise_url must stay empty in a cluster",
        ),
        (
            [*ON_S3, "--set", "config.cluster.secret_file=/run/secret"],
            "config.cluster.secret_file must stay empty in a cluster: the chart mounts the",
        ),
        (
            [*ON_S3, "--set", "terminationGracePeriodSeconds=20"],
            "terminationGracePeriodSeconds is 20: a cluster node needs at least 30",
        ),
    ],
)
def test_the_chart_refuses_what_a_cluster_cannot_run_with(flags: list[str], message: str) -> None:
    answer = helm("template", "demo", str(CHART), *flags)
    assert answer.returncode != 0
    assert message in answer.stderr, answer.stderr
