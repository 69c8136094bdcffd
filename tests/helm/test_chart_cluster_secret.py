"""The cluster secret in the chart: a Secret (an existing one, or the chart's own with a random
value made once and kept across upgrades), mounted read-only as the file that
``cluster.secret_file`` names, only in cluster mode, and its value nowhere else."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml
from helm_chart import CHART, Rendered, chart_copy, helm, notes, render

CLUSTER = CHART / "ci" / "cluster-s3.yaml"
SECRET_FILE = "SEGMENTSTORE_CLUSTER__SECRET_FILE"


def _secret_volume(rendered: Rendered) -> tuple[dict[str, object], dict[str, object]]:
    """The pod's volume of the cluster secret and the container's mount of it."""
    pod = rendered.one("StatefulSet")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "cluster-secret"]
    (mount,) = [m for m in rendered.container()["volumeMounts"] if m["name"] == "cluster-secret"]
    return volume, mount


def _secret_file(rendered: Rendered) -> str:
    (path,) = [v["value"] for v in rendered.container()["env"] if v["name"] == SECRET_FILE]
    assert isinstance(path, str)
    return path


def test_a_cluster_gets_the_chart_s_secret_as_a_read_only_file() -> None:
    rendered = render(CLUSTER, release="prod")
    secret = rendered.one("Secret", "prod-segmentstore-cluster")
    value = rendered.secret("prod-segmentstore-cluster")["secret"]
    assert len(value) >= 32 and value.isalnum()
    # Kept when the release is uninstalled: the cluster's records are signed with it.
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    volume, mount = _secret_volume(rendered)
    assert volume["secret"] == {
        "secretName": "prod-segmentstore-cluster",
        "items": [{"key": "secret", "path": "secret"}],
        "defaultMode": 0o440,
    }
    assert mount["readOnly"] is True
    assert _secret_file(rendered) == f"{mount['mountPath']}/secret"
    assert rendered.config_file()["cluster"]["secret_file"] is None


def test_the_secret_s_value_is_in_its_secret_alone() -> None:
    rendered = render(CLUSTER)
    value = rendered.secret("demo-segmentstore-cluster")["secret"]
    encoded = base64.b64encode(value.encode()).decode()
    others = [m for m in rendered.manifests if m["metadata"]["name"] != "demo-segmentstore-cluster"]
    assert {m["kind"] for m in others} >= {"ConfigMap", "StatefulSet"}
    for manifest in others:
        text = json.dumps(manifest)
        assert value not in text and encoded not in text, manifest["metadata"]["name"]


def test_an_existing_secret_is_mounted_and_none_is_made() -> None:
    rendered = render(
        CLUSTER, clusterSecret__existingSecret="ours", clusterSecret__existingSecretKey="k"
    )
    assert not rendered.all("Secret")  # S3 keys and the cluster secret: both existing ones
    volume, _ = _secret_volume(rendered)
    assert volume["secret"]["secretName"] == "ours"
    assert volume["secret"]["items"] == [{"key": "k", "path": "secret"}]


def test_a_single_node_has_no_cluster_secret() -> None:
    rendered = render()
    assert not rendered.all("Secret")
    names = {v["name"] for v in rendered.container()["env"]}
    assert SECRET_FILE not in names
    assert "cluster-secret" not in {m["name"] for m in rendered.container()["volumeMounts"]}


def test_helm_template_makes_a_new_secret_each_time() -> None:
    # What the README warns of: offline there is no installed Secret to keep.
    first, second = (render(CLUSTER).secret("demo-segmentstore-cluster") for _ in range(2))
    assert first != second


@pytest.mark.parametrize(
    ("installed", "kept"),
    [({"secret": "aW5zdGFsbGVkLWNsdXN0ZXItc2VjcmV0"}, True), ({"other": "eA=="}, False)],
)
def test_an_upgrade_keeps_the_installed_value(
    tmp_path: Path, installed: dict[str, str], kept: bool
) -> None:
    # On a cluster the chart looks the installed Secret up; offline there is none, so a copy
    # of the chart hands the same helper an installed Secret.
    check = (
        f'{{{{- $installed := dict "data" (fromJson {json.dumps(json.dumps(installed))}) }}}}\n'
        'value: {{ include "segmentstore.clusterSecretValue" (list $installed .Values) }}\n'
    )
    chart = chart_copy(tmp_path, {"upgrade-check.yaml": check})
    answer = helm("template", "demo", str(chart), "--show-only", "templates/upgrade-check.yaml")
    assert answer.returncode == 0, answer.stderr
    value = yaml.safe_load(answer.stdout)["value"]
    if kept:
        assert value == installed["secret"]
    else:  # an installed Secret without the key: a new value, as on a first install
        assert len(base64.b64decode(value)) >= 32 and value not in installed.values()


def test_notes_say_where_the_secret_is_and_to_keep_it(tmp_path: Path) -> None:
    text = notes(tmp_path, "prod", "-f", str(CLUSTER))
    assert "cluster secret in Secret prod-segmentstore-cluster" in text
    assert "clusterSecret.existingSecret" in text
    existing = notes(
        tmp_path / "existing",
        "prod",
        "-f",
        str(CLUSTER),
        "--set",
        "clusterSecret.existingSecret=ours",
    )
    assert "cluster secret of Secret ours (key secret)" in existing
