"""Settings sources: file, then environment, then flags, each validated with its origin."""

from __future__ import annotations

from pathlib import Path

import pytest

from segmentstore import InvalidArgumentError
from segmentstore.config import load_settings


def test_flags_win_over_environment_over_file(tmp_path: Path) -> None:
    config = tmp_path / "store.toml"
    config.write_text(
        "[store]\ncontainers = 8\ndata_dir = '/from/file'\n"
        "[storage_writer]\nflush_threshold_bytes = 1024\n"
    )
    environ = {
        "SEGMENTSTORE_STORE__CONTAINERS": "16",
        "SEGMENTSTORE_TIER2__OPTIONS": '{"region": "eu-west-1"}',
        "SEGMENTSTORE_AUTH__TOKENS": '{"secret": "admin"}',
        "UNRELATED": "ignored",
    }
    settings = load_settings(config, environ, {"store": {"data_dir": "/from/flag"}})
    assert settings.store.containers == 16
    assert str(settings.store.data_dir) == "/from/flag"
    assert settings.storage_writer.flush_threshold_bytes == 1024
    assert settings.tier2.options == {"region": "eu-west-1"}
    assert settings.auth.roles() == {"secret": "admin"}


def test_yaml_files_work_too(tmp_path: Path) -> None:
    config = tmp_path / "store.yaml"
    config.write_text("api:\n  port: 9999\ncache:\n  max_bytes: 67108864\n")
    settings = load_settings(config, {}, {})
    assert (settings.api.port, settings.cache.max_bytes) == (9999, 64 << 20)


@pytest.mark.parametrize(
    ("text", "environ"),
    [
        ("[store]\ncontianers = 4\n", {}),  # a typo in the file
        ("", {"SEGMENTSTORE_STORE__CONTAINERS": "many"}),
        ("", {"SEGMENTSTORE_STORE": "x"}),  # no __KEY
        ("", {"SEGMENTSTORE_NOPE__X": "1"}),  # no such section
        ("not = [valid toml", {}),
        ("", {"SEGMENTSTORE_AUTH__TOKENS": '{"t": "root"}'}),  # no such role
        # a rebuild from Tier 2 is for a local Tier 1 only
        ('[store]\nrebuild_from_tier2 = true\n[tier1]\nmode = "jetstream"\n', {}),
    ],
)
def test_bad_settings_are_refused_with_a_clear_error(
    tmp_path: Path, text: str, environ: dict[str, str]
) -> None:
    config = tmp_path / "store.toml"
    config.write_text(text)
    with pytest.raises(InvalidArgumentError):
        load_settings(config, environ, {})
