"""The chart's pod, started as a real process: the StatefulSet's container command, arguments,
environment and mounted settings file exactly as rendered, with what Kubernetes would supply
substituted (the pod name as ``HOSTNAME``, each volume a folder, Secret values resolved; see
:func:`helm_chart.start_pod`). It must become ready and serve a round trip; its data must
survive a SIGKILL on the "persistent volume"; with S3 Tier 2, the keys it reaches S3 with come
from the Secret the chart rendered, through the environment alone.
"""

from __future__ import annotations

import time
from pathlib import Path

import boto3
import pytest
import yaml
from helm_chart import render, start_pod, stop_gracefully

from segmentstore.client import SegmentStoreClient
from segmentstore.contracts.errors import SegmentStoreError
from segmentstore.harness.jetstream_cluster import JetStreamCluster

pytestmark = [pytest.mark.integration]

BUCKET = "pod-tier2"
# The pod's network namespace is played by loopback (start_pod's docstring).
ON_LOOPBACK = {"config__api__host": "127.0.0.1", "config__api__port": "0"}


def test_the_single_node_pod_serves_and_keeps_its_data_on_its_volume(tmp_path: Path) -> None:
    rendered = render(auth__tokens__w1="write", **ON_LOOPBACK)
    pod = start_pod(rendered, tmp_path)
    try:
        pod.wait_ready(60)
        with SegmentStoreClient(pod.url) as anonymous, pytest.raises(SegmentStoreError) as refused:
            anonymous.create_segment("k8s/0")
        assert refused.value.code == "unauthorized"  # the token came from the Secret
        with SegmentStoreClient(pod.url, token="w1") as client:
            client.create_segment("k8s/0")
            client.append("k8s/0", b"hello ")
            client.append("k8s/0", b"kubernetes")
            assert bytes(client.read("k8s/0", 0).data) == b"hello kubernetes"
    finally:
        if pod.proc.poll() is None:
            pod.sigkill()
        else:
            pod.stop()
    # The data directory is the mounted volume: the same pod, started again, still has it.
    assert any((tmp_path / "data").iterdir())
    again = start_pod(rendered, tmp_path)
    try:
        again.wait_ready(60)
        with SegmentStoreClient(again.url, token="w1") as client:
            assert bytes(client.read("k8s/0", 0).data) == b"hello kubernetes"
    finally:
        stop_gracefully(again)


def _s3_values(tmp_path: Path, endpoint: str, credentials: dict[str, str]) -> Path:
    values = tmp_path / "s3.yaml"
    tier2 = {
        "uri": f"s3://{BUCKET}/prod",
        "options": {"endpoint_url": endpoint, "region": "us-east-1", "create_bucket": True},
    }
    config = {"tier2": tier2, "storage_writer": {"flush_interval_ms": 100}}
    values.write_text(yaml.safe_dump({"config": config, "tier2Credentials": credentials}))
    return values


@pytest.mark.s3
def test_the_pod_reaches_s3_tier2_with_the_keys_of_the_chart_s_secret(
    tmp_path: Path, moto_endpoint: str
) -> None:
    keys = {"accessKey": "pod-key", "secretKey": "pod-secret"}
    rendered = render(_s3_values(tmp_path, moto_endpoint, keys), **ON_LOOPBACK)
    assert "pod-secret" not in str(rendered.one("ConfigMap"))
    pod = start_pod(rendered, tmp_path / "pod")
    try:
        pod.wait_ready(60)
        with SegmentStoreClient(pod.url) as client:
            client.create_segment("k8s/s3")
            client.append("k8s/s3", b"bytes bound for S3")
            client.seal("k8s/s3")
            assert bytes(client.read("k8s/s3", 0).data) == b"bytes bound for S3"
        s3 = boto3.client(
            "s3",
            endpoint_url=moto_endpoint,
            region_name="us-east-1",
            aws_access_key_id="pod-key",
            aws_secret_access_key="pod-secret",
        )
        assert _object_holding(s3, b"bytes bound for S3", deadline_s=30), pod.log()
    finally:
        stop_gracefully(pod)


@pytest.mark.s3
def test_without_the_secret_the_pod_has_no_s3_keys(tmp_path: Path, moto_endpoint: str) -> None:
    # The control for the test above: the keys reach S3 through the Secret's variables alone.
    rendered = render(_s3_values(tmp_path, moto_endpoint, {}), **ON_LOOPBACK)
    pod = start_pod(rendered, tmp_path / "pod")
    try:
        with pytest.raises(RuntimeError, match="NoCredentialsError"):
            pod.wait_ready(60)
    finally:
        pod.stop()


@pytest.mark.slow
def test_the_pod_keeps_tier1_on_jetstream(
    tmp_path: Path, jetstream_cluster: JetStreamCluster
) -> None:
    tier1 = {
        "mode": "jetstream",
        "jetstream": {"servers": jetstream_cluster.servers, "stream_prefix": "helm-pod"},
    }
    values = tmp_path / "jetstream.yaml"
    values.write_text(yaml.safe_dump({"config": {"tier1": tier1}}))
    rendered = render(values, **ON_LOOPBACK)
    pod = start_pod(rendered, tmp_path / "pod")
    try:
        pod.wait_ready(90)
        with SegmentStoreClient(pod.url) as client:
            client.create_segment("k8s/js")
            client.append("k8s/js", b"replicated ")
            client.append("k8s/js", b"three times")
    finally:
        if pod.proc.poll() is None:
            pod.sigkill()
    # Killed before any flush: the appends are only in the JetStream streams and come back.
    assert not (tmp_path / "pod" / "data" / "tier1").exists()
    again = start_pod(rendered, tmp_path / "pod")
    try:
        again.wait_ready(90)
        with SegmentStoreClient(again.url) as client:
            assert bytes(client.read("k8s/js", 0).data) == b"replicated three times"
    finally:
        stop_gracefully(again)


def _object_holding(s3: object, payload: bytes, deadline_s: float) -> bool:
    """Whether some object of the bucket holds ``payload`` (a flushed chunk) in time."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="prod/")  # type: ignore[attr-defined]
        for item in listed.get("Contents", []):
            body = s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()  # type: ignore[attr-defined]
            if payload in body:
                return True
        time.sleep(0.2)
    return False
