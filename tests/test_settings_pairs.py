"""Settings that bound one another: each pair is refused out of order, with both keys named."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from segmentstore.settings import ORDERED_PAIRS, Settings


def _section(settings: BaseModel, path: str) -> BaseModel:
    for part in path.split("."):
        settings = getattr(settings, part)
    return settings


def _overrides(path: str, values: dict[str, int]) -> dict[str, Any]:
    """``tier1.jetstream`` -> ``{"tier1": {"jetstream": values}}``."""
    first, *rest = path.split(".")
    for part in reversed(rest):
        values = {part: values}
    return {first: values}


@pytest.mark.parametrize(("path", "lower", "upper"), ORDERED_PAIRS, ids=lambda v: str(v))
def test_a_pair_out_of_order_is_refused_naming_both_keys(path: str, lower: str, upper: str) -> None:
    upper_value = getattr(_section(Settings(), path), upper)
    with pytest.raises(ValidationError) as refused:
        Settings().with_overrides(**_overrides(path, {lower: upper_value + 1}))
    message = str(refused.value)
    assert f"{path}.{lower}" in message and f"{path}.{upper}" in message, message


@pytest.mark.parametrize(("path", "lower", "upper"), ORDERED_PAIRS, ids=lambda v: str(v))
def test_a_pair_may_be_equal(path: str, lower: str, upper: str) -> None:
    value = getattr(_section(Settings(), path), upper)
    settings = Settings().with_overrides(**_overrides(path, {lower: value}))
    assert getattr(_section(settings, path), lower) == value


def test_every_min_max_pair_of_the_tree_is_checked() -> None:
    """A new ``x_min_y`` / ``x_max_y`` pair must join ORDERED_PAIRS."""
    found = set()

    def walk(model: BaseModel, path: str) -> None:
        names = set(type(model).model_fields)
        for name in names:
            value = getattr(model, name)
            if isinstance(value, BaseModel):
                walk(value, f"{path}.{name}" if path else name)
            elif (
                "_min_" in f"_{name}_"
                and (upper := re.sub(r"(^|_)min(_|$)", r"\1max\2", name)) in names
            ):
                found.add((path, name, upper))

    walk(Settings(), "")
    assert found <= set(ORDERED_PAIRS), found - set(ORDERED_PAIRS)
    assert len(found) >= 2  # recovery_retry_*, retry_*: the walk sees them


@pytest.mark.parametrize(
    ("overrides", "keys"),
    [
        (
            {
                "store": {"max_append_bytes": 4 << 20},
                "durable_log": {"max_in_flight_bytes": 2 << 20},
            },
            ["durable_log.max_in_flight_bytes", "store.max_append_bytes"],
        ),
        (
            {"store": {"max_append_bytes": 8 << 20}, "cache": {"max_bytes": 8 << 20}},
            ["cache.max_bytes", "store.max_append_bytes", "cache.block_bytes"],
        ),
    ],
)
def test_bounds_across_sections_name_every_key(overrides: dict[str, Any], keys: list[str]) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings().with_overrides(**overrides)
    assert all(key in str(refused.value) for key in keys), str(refused.value)
