"""The chart's cluster values, run as three pods: each pod the StatefulSet's container exactly
as rendered (see :func:`helm_chart.start_pod`), over a loopback JetStream cluster set up as
docs/nats-auth.md says (:mod:`secured_nats`: the segment store's own NATS account and user, TLS)
and a moto S3 server (Tier 2). The NATS password, the NATS servers' CA and the S3 keys come
from existing Secrets, as ci/cluster-s3.yaml names them; the cluster secret from the Secret the
chart makes, mounted as a file (the first render installs it and every pod mounts that one).
The cluster DNS is played by loopback: each pod's advertised name resolves to 127.0.0.1, on a
port chosen up front and rendered into its settings file.

The three must form one cluster (node ids the pod names, the containers shared out) and serve
a round trip through any pod; a fourth pod (scaling up) must get its share by hand-over, and on
SIGTERM (scaling down) hand it back without losing a byte. The NATS servers refuse the pods
nothing, and the cluster secret is in no pod's environment, settings file or log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, render, start_pod, stop_gracefully
from secured_nats import STORE_PASSWORD, STORE_USER, running, violations
from store_cluster import StoreCluster

from segmentstore.client import SegmentStoreClient
from segmentstore.harness.jetstream_cluster import JetStreamCluster
from segmentstore.harness.served_store import ServedStore
from segmentstore.loopback import free_port

pytestmark = [pytest.mark.integration, pytest.mark.s3]

PODS = 3
NAMESPACE = "streams"
# The existing Secrets ci/cluster-s3.yaml names (the NATS CA's is added once it is made), as
# `kubectl create secret generic` makes them.
EXISTING_SECRETS = {
    "segmentstore-s3": {"access-key": "cluster-key", "secret-key": "cluster-secret"},
    "segmentstore-nats": {"password": STORE_PASSWORD},
}
# The chart's own Secret of the cluster secret, and its key.
CLUSTER_SECRET = ("demo-segmentstore-cluster", "secret")


def _values(tmp_path: Path, nats: list[str], moto_endpoint: str) -> Path:
    """ci/cluster-s3.yaml's cluster, pointed at the loopback JetStream and S3 (the NATS user
    and the CA's path stay as the file has them)."""
    tier2 = {
        "uri": "s3://pod-cluster/streams",
        "options": {"endpoint_url": moto_endpoint, "region": "us-east-1", "create_bucket": True},
    }
    config = {
        "tier1": {"jetstream": {"servers": nats}},
        "tier2": tier2,
        "cache": {"max_bytes": 64 << 20},  # three pods share this machine
        # Leases long enough that a node starved of CPU by a busy machine (a full suite run
        # beside others) is not declared gone; hand-overs on join and SIGTERM do not wait on it.
        "cluster": {"lease_ms": 20_000},
    }
    values = tmp_path / "loopback.yaml"
    values.write_text(yaml.safe_dump({"config": config}))
    return values


def _start(
    cluster: StoreCluster, values: Path, root: Path, ordinal: int, secrets: dict[str, Any]
) -> tuple[ServedStore, str]:
    """Pod ``ordinal`` of the rendered StatefulSet, as one of ``cluster``'s nodes; its
    loopback URL. Its settings file carries a port chosen up front, since its advertised URL
    names it before the process listens. ``secrets`` are the Secrets the cluster holds: the
    first render installs the chart's cluster Secret there, and later pods mount that one, as
    every pod of a StatefulSet does (a later render's random value is never applied: an
    upgrade's render finds the installed Secret by lookup)."""
    port = free_port()
    rendered = render(
        CHART / "ci" / "cluster-s3.yaml",
        values,
        namespace=NAMESPACE,
        config__api__host="127.0.0.1",
        config__api__port=str(port),
    )
    secrets.setdefault(CLUSTER_SECRET[0], rendered.secret(CLUSTER_SECRET[0]))
    name = f"demo-segmentstore-{ordinal}"
    dns_name = f"{name}.demo-segmentstore-headless.{NAMESPACE}.svc.cluster.local"
    pod = start_pod(rendered, root / name, ordinal, secrets=secrets, hosts={dns_name: "127.0.0.1"})
    cluster.nodes[name] = pod
    pod.wait_listening(120)
    return pod, f"http://127.0.0.1:{port}"


def _assert_secret_out_of_sight(pod: ServedStore, root: Path, secret: str) -> None:
    """The running pod holds the cluster secret in its mounted file alone: not in its process
    environment, its settings file or its log."""
    assert len(secret) >= 16
    environment = Path(f"/proc/{pod.proc.pid}/environ").read_bytes()
    assert b"SEGMENTSTORE_CLUSTER__SECRET_FILE=" in environment
    assert secret.encode() not in environment
    (settings,) = (root / "config").iterdir()
    assert secret not in settings.read_text()
    assert (root / "cluster-secret" / "secret").read_text() == secret
    assert secret not in pod.log()


def _read_back(url: str, segments: dict[str, bytes]) -> None:
    with SegmentStoreClient(url) as client:
        for segment, payload in segments.items():
            assert bytes(client.read(segment, 0).data) == payload, segment


@pytest.fixture
def secured_nats(tmp_path: Path) -> Iterator[tuple[JetStreamCluster, Path]]:
    with running(tmp_path / "nats") as servers:
        yield servers


def test_three_pods_form_a_cluster_that_scales_up_and_down(
    tmp_path: Path, secured_nats: tuple[JetStreamCluster, Path], moto_endpoint: str
) -> None:
    nats, ca_file = secured_nats
    values = _values(tmp_path, nats.servers, moto_endpoint)
    # The pods, as the nodes of a StoreCluster: its wait for a settled, balanced cluster.
    cluster = StoreCluster(tmp_path, nats.servers, "s3://pod-cluster", prefix="-")
    secrets: dict[str, Any] = {**EXISTING_SECRETS, "nats-ca": {"ca.crt": ca_file.read_text()}}
    addresses: dict[str, str] = {}
    try:
        pods = []
        for ordinal in range(PODS):
            pod, addresses[f"demo-segmentstore-{ordinal}"] = _start(
                cluster, values, tmp_path, ordinal, secrets
            )
            pods.append(pod)
        cluster.wait_settled(timeout_s=120)
        # One cluster: the node ids are the pod names, the URLs their (played) DNS names.
        view = cluster.cluster_map()
        assert {node["id"]: node["url"] for node in view["nodes"]} == addresses
        assert {c["owner"] for c in view["containers"]} == set(addresses)

        # Written through one pod, read through another: requests reach every owner.
        segments = {f"k8s/cluster-{i}": f"event {i} ".encode() * (i + 1) for i in range(12)}
        with SegmentStoreClient(pods[0].url) as client:
            for segment, payload in segments.items():
                client.create_segment(segment)
                client.append(segment, payload)
        _read_back(pods[-1].url, segments)

        # Scaling up: the new pod joins and gets its share of the containers by hand-over.
        joined, url = _start(cluster, values, tmp_path, PODS, secrets)
        cluster.wait_settled(timeout_s=120, nodes=PODS + 1)
        shares = {n["id"]: n["containers"] for n in cluster.cluster_map()["nodes"]}
        assert shares[f"demo-segmentstore-{PODS}"], shares
        assert cluster.cluster_map(url)["node"] == f"demo-segmentstore-{PODS}"
        _read_back(joined.url, segments)

        # Scaling down: the kubelet's SIGTERM hands the pod's containers to the others.
        stop_gracefully(joined)
        assert "handing over" in joined.log(), joined.log()
        cluster.wait_settled(timeout_s=120, nodes=PODS)
        survivors = cluster.cluster_map()
        assert {node["id"] for node in survivors["nodes"]} == set(addresses)
        _read_back(pods[0].url, segments)
        name, key = CLUSTER_SECRET
        for ordinal, pod in enumerate(pods):
            root = tmp_path / f"demo-segmentstore-{ordinal}"
            _assert_secret_out_of_sight(pod, root, secrets[name][key])
        assert secrets[name][key] not in joined.log()
        assert not violations(nats, STORE_USER)
    finally:
        cluster.stop()
