"""Where settings come from, for the composition root: a file, the environment, then flags.

Each later source wins over the earlier ones, key by key: the file (``--config``, TOML or
YAML), then ``SEGMENTSTORE_<SECTION>__<KEY>`` variables, then command-line flags. Everything
is validated once, by :class:`Settings`, so a typo in any source is an error that names it.
The environment is handed in by the caller: nothing below the command line reads it.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from segmentstore.contracts.errors import InvalidArgumentError
from segmentstore.settings import Settings

ENV_PREFIX = "SEGMENTSTORE_"


def load_settings(
    config_file: Path | None,
    environ: Mapping[str, str],
    flags: Mapping[str, Mapping[str, Any]],
) -> Settings:
    merged: dict[str, dict[str, Any]] = {}
    if config_file is not None:
        _merge(merged, _read_file(config_file), f"config file {config_file}")
    _merge(merged, _from_environment(environ), "the environment")
    _merge(merged, {k: dict(v) for k, v in flags.items()}, "the command line")
    try:
        return Settings.model_validate(merged)
    except ValidationError as error:
        raise InvalidArgumentError(f"invalid settings: {_describe(error)}") from None


def _describe(error: ValidationError) -> str:
    """Where and what, never the value given: it may be a secret, and so may an auth token
    that is a key of ``auth.tokens`` (shown masked)."""
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        where = [str(part) for part in item["loc"]]
        if where[:2] == ["auth", "tokens"] and len(where) > 2:
            where[2] = "**********"
        problems.append(f"{'.'.join(where) or 'settings'}: {item['msg']}")
    return "; ".join(problems)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as error:
        raise InvalidArgumentError(f"cannot read config file {path}: {error}") from error
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        else:
            data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as error:
        raise InvalidArgumentError(f"config file {path} does not parse: {error}") from error
    if not isinstance(data, dict):
        raise InvalidArgumentError(f"config file {path} must hold a table of sections")
    return data


def _from_environment(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        section, separator, key = name[len(ENV_PREFIX) :].lower().partition("__")
        if not separator or not section or not key:
            raise InvalidArgumentError(
                f"environment variable {name} is not SEGMENTSTORE_<SECTION>__<KEY>"
            )
        # A nested key (SEGMENTSTORE_TIER1__JETSTREAM__SERVERS) lands in its sub-table.
        *path, leaf = key.split("__")
        table = found.setdefault(section, {})
        for part in path:
            table = table.setdefault(part, {})
        table[leaf] = _env_value(value)
    return found


def _env_value(value: str) -> Any:
    # Tables (e.g. tier2 options, auth tokens) come as JSON; everything else as text that
    # the settings model converts and checks.
    stripped = value.strip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as error:
            raise InvalidArgumentError(f"not JSON: {value!r}: {error}") from error
    return value


def _merge(into: dict[str, dict[str, Any]], source: Mapping[str, Any], where: str) -> None:
    for section, values in source.items():
        if not isinstance(values, Mapping):
            raise InvalidArgumentError(f"{where}: section {section!r} must be a table")
        _merge_table(into.setdefault(section, {}), values)


def _merge_table(into: dict[str, Any], values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge_table(into[key], value)
        else:
            into[key] = value
