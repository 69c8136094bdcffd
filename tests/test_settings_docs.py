"""docs/operations.md's table of settings is the settings tree: every setting, one row each,
with its default as the tree has it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from segmentstore.settings import Settings

DOCUMENT = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def tree_defaults(model: BaseModel | None = None, prefix: str = "") -> dict[str, Any]:
    """Every setting of the tree (``tier1.jetstream.servers``) and its default."""
    model = model if model is not None else Settings()
    found: dict[str, Any] = {}
    for key in type(model).model_fields:
        value = getattr(model, key)
        if isinstance(value, BaseModel):
            found |= tree_defaults(value, f"{prefix}{key}.")
        else:
            found[f"{prefix}{key}"] = value
    return found


def documented() -> dict[str, str]:
    """The table's rows: setting -> its default as written."""
    text = DOCUMENT.read_text()
    start = text.index("| setting | default | meaning |")
    rows = text[start : text.index("\n\n", start)].splitlines()[2:]
    table = {}
    for row in rows:
        key, default, _ = (cell.strip() for cell in row.strip().strip("|").split("|", 2))
        assert re.fullmatch(r"`[a-z0-9_.]+`", key), f"one setting per row: {key}"
        assert key.strip("`") not in table, f"{key} twice"
        table[key.strip("`")] = default
    return table


def parse_default(text: str) -> Any:
    """A default as the table writes it: ``8 MiB``, ``30000``, ``false``, ``none``, or a value
    in backticks (JSON, else a string)."""
    if text == "none":
        return None
    if text in ("true", "false"):
        return text == "true"
    sized = re.fullmatch(r"(\d+) (KiB|MiB|GiB)", text)
    if sized:
        return int(sized.group(1)) * _UNITS[sized.group(2)]
    if text.isdigit():
        return int(text)
    quoted = re.fullmatch(r"`(.*)`", text)
    assert quoted, f"a default is a number, a size, true/false, none or `a value`: {text}"
    try:
        return json.loads(quoted.group(1))
    except ValueError:
        return quoted.group(1)


def _comparable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    return value


def test_every_setting_has_one_row_and_every_row_is_a_setting() -> None:
    assert sorted(documented()) == sorted(tree_defaults())


def test_each_row_says_the_default_of_the_tree() -> None:
    for key, written in documented().items():
        default = tree_defaults()[key]
        if default == "":  # derived where it is used; the table says from what
            continue
        wanted = _comparable(default)
        if isinstance(wanted, str) and key.endswith("data_dir"):
            wanted = f"./{wanted}"
        assert parse_default(written) == wanted, (key, written, default)
