"""The Helm chart's ``config`` values, derived from the settings tree (segmentstore/settings.py).

The chart renders ``config`` into the file ``segmentstore serve --config`` reads, so its keys
must be the settings tree's, one for one. This module derives from the pydantic model the JSON
schema of ``config`` (every section and key, their types and bounds, no other key), which
``values.schema.json`` embeds; ``make helm-schema`` rewrites it after a setting is added, and
the chart's tests fail until it has been. Settings that hold secrets are not in ``config``:
the chart sets them from a Secret, through the environment variable named here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from segmentstore.settings import Settings

# "section.key" -> the environment variable the chart fills from a Secret instead.
SECRET_SETTINGS = {"auth.tokens": "SEGMENTSTORE_AUTH__TOKENS"}

# Annotations pydantic writes that Helm's schema validator has no use for (the model's defaults
# are not the chart's: a pod listens on every interface and keeps its data on a volume).
_DROPPED = {"title", "format", "writeOnly", "default"}


def setting_names() -> set[str]:
    """Every setting of the tree, as ``section.key``."""
    return {
        f"{section}.{key}"
        for section, field in Settings.model_fields.items()
        for key in _section_model(field.annotation).model_fields
    }


def config_schema() -> dict[str, Any]:
    """The JSON schema of the chart's ``config`` value: the settings tree less its secrets."""
    sections: dict[str, Any] = {}
    for section, field in Settings.model_fields.items():
        model = _section_model(field.annotation)
        raw = model.model_json_schema()
        keys = {
            key: _clean(schema)
            for key, schema in raw["properties"].items()
            if f"{section}.{key}" not in SECRET_SETTINGS
        }
        if not keys:
            continue
        sections[section] = {
            "type": "object",
            "description": f"settings: {section}",
            "additionalProperties": False,
            "required": sorted(keys),
            "properties": keys,
        }
    return {
        "type": "object",
        "description": "The settings tree, one key per setting (segmentstore serve --print-config)",
        "additionalProperties": False,
        "required": sorted(sections),
        "properties": sections,
    }


def _section_model(annotation: Any) -> Any:
    assert isinstance(annotation, type), annotation
    return annotation


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
