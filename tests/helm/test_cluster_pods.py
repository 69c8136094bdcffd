"""The chart's cluster values, run as three pods: each pod the StatefulSet's container exactly
as rendered (see :func:`helm_chart.start_pod`), over a loopback JetStream cluster (Tier 1 and
the leases) and a moto S3 server (Tier 2, its keys from an existing Secret). The cluster DNS is
played by loopback: each pod's advertised name resolves to 127.0.0.1, on a port chosen up
front and rendered into its settings file. The three must form one cluster (node ids the pod
names, the containers shared out), serve a round trip through any pod, and on a SIGTERM to one
(scaling down) hand its containers to the others without losing a byte.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from helm_chart import CHART, render, start_pod, stop_gracefully
from store_cluster import StoreCluster

from segmentstore.bench.jetstream_cluster import JetStreamCluster
from segmentstore.client import SegmentStoreClient
from segmentstore.loopback import free_port

pytestmark = [pytest.mark.integration, pytest.mark.s3]

PODS = 3
NAMESPACE = "streams"
# The existing Secret ci/cluster-s3.yaml names, as `kubectl create secret generic` makes it.
S3_SECRET = {"segmentstore-s3": {"access-key": "cluster-key", "secret-key": "cluster-secret"}}


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
    }
    values = tmp_path / "loopback.yaml"
    values.write_text(yaml.safe_dump({"config": config}))
    return values


def test_three_pods_form_a_cluster_and_hand_over_on_sigterm(
    tmp_path: Path, jetstream_cluster: JetStreamCluster, moto_endpoint: str
) -> None:
    values = _values(tmp_path, jetstream_cluster.servers, moto_endpoint)
    # The pods, as the nodes of a StoreCluster: its wait for a settled, balanced cluster.
    cluster = StoreCluster(tmp_path, jetstream_cluster.servers, "s3://pod-cluster", prefix="-")
    addresses: dict[str, str] = {}
    try:
        for ordinal in range(PODS):
            port = free_port()
            rendered = render(
                CHART / "ci" / "cluster-s3.yaml",
                values,
                namespace=NAMESPACE,
                config__api__host="127.0.0.1",
                config__api__port=str(port),
            )
            name = f"demo-segmentstore-{ordinal}"
            dns_name = f"{name}.demo-segmentstore-headless.{NAMESPACE}.svc.cluster.local"
            pod = start_pod(
                rendered,
                tmp_path / name,
                ordinal,
                secrets=S3_SECRET,
                hosts={dns_name: "127.0.0.1"},
            )
            cluster.nodes[name] = pod
            addresses[name] = f"http://127.0.0.1:{port}"
        for pod in cluster.nodes.values():
            pod.wait_listening(120)
        cluster.wait_settled(timeout_s=120)

        view = cluster.cluster_map()
        assert {node["id"]: node["url"] for node in view["nodes"]} == addresses
        assert {c["owner"] for c in view["containers"]} == set(addresses)

        first, _, last = (cluster.nodes[name] for name in addresses)
        segments = {f"k8s/cluster-{i}": f"event {i} ".encode() * (i + 1) for i in range(12)}
        with SegmentStoreClient(first.url) as client:
            for segment, payload in segments.items():
                client.create_segment(segment)
                client.append(segment, payload)
        with SegmentStoreClient(last.url) as client:
            for segment, payload in segments.items():
                assert bytes(client.read(segment, 0).data) == payload, segment

        # Scaling down: the kubelet's SIGTERM hands the pod's containers to the others.
        stop_gracefully(last)
        assert "handing over" in last.log(), last.log()
        cluster.wait_settled(timeout_s=120, nodes=PODS - 1)
        survivors = cluster.cluster_map()
        assert {node["id"] for node in survivors["nodes"]} == set(list(addresses)[:-1])
        with SegmentStoreClient(first.url) as client:
            for segment, payload in segments.items():
                assert bytes(client.read(segment, 0).data) == payload, segment
    finally:
        cluster.stop()
