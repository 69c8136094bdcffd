"""The chart's cluster values, run as three pods: each pod the StatefulSet's container exactly
as rendered (see :func:`helm_chart.start_pod`), over a loopback JetStream cluster (Tier 1 and
the leases) and a moto S3 server (Tier 2, its keys from an existing Secret). The cluster DNS is
played by loopback: each pod's advertised name resolves to 127.0.0.1, on a port chosen up
front and rendered into its settings file. The cluster secret is the Secret the chart makes,
mounted as a file: the first render installs it and every pod mounts that one. The three must
form one cluster (node ids the pod names, the containers shared out) and serve a round trip
through any pod; a fourth pod (scaling up) must get its share by hand-over, and on SIGTERM
(scaling down) hand it back without losing a byte. The secret is never in the ConfigMap, the
environment or a log.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, Rendered, render, start_pod, stop_gracefully
from served_store import ServedStore
from store_cluster import StoreCluster

from segmentstore.bench.jetstream_cluster import JetStreamCluster
from segmentstore.client import SegmentStoreClient
from segmentstore.loopback import free_port

pytestmark = [pytest.mark.integration, pytest.mark.s3]

PODS = 3
NAMESPACE = "streams"
# The existing Secret ci/cluster-s3.yaml names, as `kubectl create secret generic` makes it.
S3_SECRET = {"segmentstore-s3": {"access-key": "cluster-key", "secret-key": "cluster-secret"}}
# The chart's own Secret of the cluster secret, and its key.
CLUSTER_SECRET = ("demo-segmentstore-cluster", "secret")


def _values(tmp_path: Path, nats: list[str], moto_endpoint: str) -> Path:
    """ci/cluster-s3.yaml's cluster, pointed at the loopback JetStream and S3."""
    tier2 = {
        "uri": "s3://pod-cluster/streams",
        "options": {"endpoint_url": moto_endpoint, "region": "us-east-1", "create_bucket": True},
    }
    config = {
        "tier1": {"jetstream": {"servers": nats, "stream_prefix": f"helm-{uuid.uuid4().hex[:8]}"}},
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
    name, key = CLUSTER_SECRET
    _assert_kept_out_of_sight(rendered, rendered.secret(name)[key])
    secrets.setdefault(name, rendered.secret(name))
    name = f"demo-segmentstore-{ordinal}"
    dns_name = f"{name}.demo-segmentstore-headless.{NAMESPACE}.svc.cluster.local"
    pod = start_pod(rendered, root / name, ordinal, secrets=secrets, hosts={dns_name: "127.0.0.1"})
    cluster.nodes[name] = pod
    pod.wait_listening(120)
    return pod, f"http://127.0.0.1:{port}"


def _assert_kept_out_of_sight(rendered: Rendered, secret: str) -> None:
    """The cluster secret is in its Secret alone: in no other manifest (the ConfigMap, the
    StatefulSet's environment), plain or base64-encoded."""
    assert len(secret) >= 16
    encoded = base64.b64encode(secret.encode()).decode()
    for manifest in rendered.manifests:
        if manifest["kind"] == "Secret" and manifest["metadata"]["name"] == CLUSTER_SECRET[0]:
            continue
        text = json.dumps(manifest)
        assert secret not in text and encoded not in text, manifest["metadata"]["name"]
    env = rendered.container()["env"]
    (path,) = [v["value"] for v in env if v["name"] == "SEGMENTSTORE_CLUSTER__SECRET_FILE"]
    assert "cluster.secret" not in rendered.config_file() and path.endswith("/secret")


def _read_back(url: str, segments: dict[str, bytes]) -> None:
    with SegmentStoreClient(url) as client:
        for segment, payload in segments.items():
            assert bytes(client.read(segment, 0).data) == payload, segment


def test_three_pods_form_a_cluster_that_scales_up_and_down(
    tmp_path: Path, jetstream_cluster: JetStreamCluster, moto_endpoint: str
) -> None:
    values = _values(tmp_path, jetstream_cluster.servers, moto_endpoint)
    # The pods, as the nodes of a StoreCluster: its wait for a settled, balanced cluster.
    cluster = StoreCluster(tmp_path, jetstream_cluster.servers, "s3://pod-cluster", prefix="-")
    secrets: dict[str, Any] = dict(S3_SECRET)
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
        for pod in [*pods, joined]:
            assert secrets[name][key] not in pod.log()
    finally:
        cluster.stop()
