"""Attribute updates: the five conditional update types of docs/api.md, applied all-or-nothing."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from segmentstore.contracts.errors import BadAttributeUpdateError, InvalidArgumentError
from segmentstore.contracts.names import (
    INT64_MAX,
    INT64_MIN,
    validate_attribute_key,
    validate_int64,
)


class UpdateType(StrEnum):
    REPLACE = "replace"
    REPLACE_IF_ABSENT = "replace_if_absent"
    REPLACE_IF_GREATER = "replace_if_greater"
    REPLACE_IF_EQUALS = "replace_if_equals"
    ACCUMULATE = "accumulate"


@dataclass(frozen=True, slots=True)
class AttributeUpdate:
    key: str
    value: int
    type: UpdateType = UpdateType.REPLACE
    # For REPLACE_IF_EQUALS: the value expected now; None means "expected absent".
    compare: int | None = None

    @classmethod
    def parse(cls, raw: Any) -> AttributeUpdate:
        """Build an update from an API-shaped dict or pass an ``AttributeUpdate`` through."""
        if isinstance(raw, AttributeUpdate):
            return raw
        if not isinstance(raw, dict):
            raise InvalidArgumentError(f"an attribute update must be an object, not {raw!r}")
        unknown = set(raw) - {"key", "value", "type", "compare"}
        if unknown:
            raise InvalidArgumentError(f"unknown attribute update fields {sorted(unknown)}")
        try:
            kind = UpdateType(raw.get("type", "replace"))
        except ValueError:
            raise InvalidArgumentError(
                f"unknown attribute update type {raw.get('type')!r}"
            ) from None
        compare = raw.get("compare")
        return cls(
            key=validate_attribute_key(raw.get("key")),
            value=validate_int64("attribute value", raw.get("value")),
            type=kind,
            compare=None if compare is None else validate_int64("compare", compare),
        )


def resolve_updates(current: dict[str, int], updates: list[AttributeUpdate]) -> dict[str, int]:
    """The new values that ``updates`` give, checked against ``current`` in order.

    Raises ``BadAttributeUpdateError`` naming the first failing key; ``current`` is untouched,
    so a failed batch changes nothing.
    """
    values: dict[str, int] = {}
    for update in updates:
        existing = values.get(update.key, current.get(update.key))
        match update.type:
            case UpdateType.REPLACE:
                new = update.value
            case UpdateType.REPLACE_IF_ABSENT:
                if existing is not None:
                    raise BadAttributeUpdateError(update.key, f"exists with value {existing}")
                new = update.value
            case UpdateType.REPLACE_IF_GREATER:
                if existing is not None and update.value <= existing:
                    raise BadAttributeUpdateError(
                        update.key, f"{update.value} is not greater than {existing}"
                    )
                new = update.value
            case UpdateType.REPLACE_IF_EQUALS:
                if existing != update.compare:
                    raise BadAttributeUpdateError(
                        update.key, f"is {existing}, expected {update.compare}"
                    )
                new = update.value
            case UpdateType.ACCUMULATE:
                new = (existing or 0) + update.value
                if not INT64_MIN <= new <= INT64_MAX:
                    raise BadAttributeUpdateError(update.key, "accumulation overflows 64 bits")
        values[update.key] = new
    return values
