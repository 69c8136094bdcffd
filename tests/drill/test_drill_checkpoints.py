"""A spawned drill deployment checkpoints every few dozen frames, so that Tier 1 is truncated
behind Tier 2 within seconds and every recovery reads from Tier 2 what Tier 1 no longer has;
the interval is drawn from the seed, so runs differ."""

from __future__ import annotations

from segmentstore.drill.cluster_deployment import _SETTINGS as CLUSTER_SETTINGS
from segmentstore.drill.deployment import (
    CHECKPOINT_EVERY_FRAMES,
    checkpoint_every_frames,
    node_settings,
)
from segmentstore.settings import DurableLogSettings, Settings


def test_every_seed_draws_a_short_interval_and_the_runs_mix_them() -> None:
    default = DurableLogSettings().checkpoint_every_frames
    drawn = {checkpoint_every_frames(seed) for seed in range(20)}
    assert drawn == set(CHECKPOINT_EVERY_FRAMES)
    assert max(drawn) * 5 <= default


def test_the_spawned_nodes_settings_carry_it_and_validate() -> None:
    settings = node_settings("file:///tmp/t2", {}, checkpoint_frames=20)
    assert settings["durable_log"]["checkpoint_every_frames"] == 20
    Settings.model_validate(settings)
    assert CLUSTER_SETTINGS["SEGMENTSTORE_DURABLE_LOG__CHECKPOINT_EVERY_FRAMES"] == "20"
