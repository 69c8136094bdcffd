"""The fast durability mutants (``make mutants --fast``'s subset, tests/support/mutant_catalog.py)
must each be caught by their checks: a change that lets one through fails ``make test``."""

from __future__ import annotations

import pytest
from mutant_catalog import CATALOG
from mutants import try_mutant

pytestmark = [pytest.mark.slow, pytest.mark.integration]

FAST = [m for m in CATALOG if m.fast]


def test_the_fast_subset_fits_in_five_minutes() -> None:
    assert FAST and sum(m.budget_s for m in FAST) <= 600  # budgets: at most twice the time
    assert {m.name for m in FAST} >= {"tier2-chunk-not-synced", "tier1-no-fdatasync"}


@pytest.mark.parametrize("mutant", FAST, ids=lambda m: m.name)
def test_the_mutant_is_caught(mutant: object) -> None:
    outcome = try_mutant(mutant, None)  # type: ignore[arg-type]
    assert outcome.caught, outcome
