"""The Helm chart's ``config`` values, derived from the settings tree (segmentstore/settings.py).

The chart renders ``config`` into the file ``segmentstore serve --config`` reads, so its keys
must be the settings tree's, one for one, nested tables (``tier1.jetstream``) included. This
module derives from the pydantic model the JSON schema of ``config`` (every section, table and
key, their types and bounds, no other key), which ``values.schema.json`` embeds; ``make
helm-schema`` rewrites it after a setting is added, and the chart's tests fail until it has
been. Settings that hold secrets are not values of ``config``: the chart passes them from a
Secret, through the environment variable or the mounted file named here. Their keys stay in the
schema, of any type, only so that the chart can refuse them with a message saying where they
belong (a schema error could only call them unknown).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from segmentstore.settings import Settings

# setting -> the environment variable the chart fills from a Secret instead of the ConfigMap.
SECRET_SETTINGS = {
    "auth.tokens": "SEGMENTSTORE_AUTH__TOKENS",
    "tier1.jetstream.password": "SEGMENTSTORE_TIER1__JETSTREAM__PASSWORD",
    "tier1.jetstream.token": "SEGMENTSTORE_TIER1__JETSTREAM__TOKEN",
}

# setting -> the setting naming the file the chart mounts it as, from a Secret.
SECRET_FILES = {"cluster.secret": "cluster.secret_file"}
# Every setting that holds a secret, refused in ``config``.
SECRETS = set(SECRET_SETTINGS) | set(SECRET_FILES)

# Annotations pydantic writes that Helm's schema validator has no use for (the model's defaults
# are not the chart's: a pod listens on every interface and keeps its data on a volume).
_DROPPED = {"title", "format", "writeOnly", "default", "description"}


def setting_names(model: type[BaseModel] = Settings, prefix: str = "") -> set[str]:
    """Every setting of the tree, as its dotted path (``tier1.jetstream.servers``)."""
    names: set[str] = set()
    for key, field in model.model_fields.items():
        if _is_table(field.annotation):
            names |= setting_names(field.annotation, f"{prefix}{key}.")
        else:
            names.add(f"{prefix}{key}")
    return names


def config_schema() -> dict[str, Any]:
    """The JSON schema of the chart's ``config`` value: the settings tree less its secrets."""
    schema = _table_schema(Settings, "")
    schema["description"] = "The settings tree, one key per setting (segmentstore serve --config)"
    return schema


def _table_schema(model: type[BaseModel], prefix: str) -> dict[str, Any]:
    raw = model.model_json_schema()
    keys: dict[str, Any] = {}
    required: list[str] = []
    for key, field in model.model_fields.items():
        name = f"{prefix}{key}"
        if name in SECRETS:
            keys[key] = {"description": f"a secret: the chart refuses config.{name}"}
            continue
        if _is_table(field.annotation):
            keys[key] = _table_schema(field.annotation, f"{name}.")
        else:
            keys[key] = _clean(raw["properties"][key])
        # Helm drops keys whose value is null while it lints: those cannot be required; nor
        # can a table of secrets alone (auth), which has no value in ``config``.
        nullable = {"type": "null"} in keys[key].get("anyOf", [])
        if not nullable and not _secrets_alone(field.annotation, f"{name}."):
            required.append(key)
    return {
        "type": "object",
        "additionalProperties": False,
        "required": sorted(required),
        "properties": keys,
    }


def _secrets_alone(annotation: Any, prefix: str) -> bool:
    """Whether ``annotation`` is a table whose every setting is a secret."""
    return _is_table(annotation) and all(
        f"{prefix}{key}" in SECRETS for key in annotation.model_fields
    )


def _is_table(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _clean(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _clean(v) for k, v in schema.items() if k not in _DROPPED}
    if isinstance(schema, list):
        return [_clean(item) for item in schema]
    return schema


def rewrite(schema_file: Path) -> None:
    """Replaces ``properties.config`` of the chart's values schema with :func:`config_schema`."""
    document = json.loads(schema_file.read_text())
    document["properties"]["config"] = config_schema()
    schema_file.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    rewrite(Path(sys.argv[1]))
