"""The durability mutants that ``make mutants`` applies, one at a time, to a scratch copy.

Each is a small declarative entry: the text it replaces (a file, the exact old text, the new
text: a mutant whose old text is no longer in the file is reported *stale*, never silently
skipped), the checks that must catch it, tried in order until one fails, and how long the
whole may take. A check *catches* a mutant when it exits with status 1 (a test failed, a drill
found a loss); any other outcome (it passes, cannot run, runs out of time) does not.

To add a mutant, add an entry here; ``fast`` ones also run in ``make test``
(tests/mutants/test_fast_mutants.py) and must stay within its five minutes together.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from segmentstore.tier2.layout import MANIFEST_SUFFIX


@dataclass(frozen=True)
class Replacement:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Check:
    name: str
    argv: tuple[str, ...]

    @staticmethod
    def pytest(path: str, *args: str) -> Check:
        """A test file (or node id) run by pytest in the scratch copy."""
        command = ("-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-n", "0", path, *args)
        return Check(path, (sys.executable, *command))

    @staticmethod
    def drill(*args: str) -> Check:
        """``segmentstore drill --spawn ARGS`` from the scratch copy."""
        command = (sys.executable, "-m", "segmentstore.cli", "drill", "--spawn", *args)
        return Check("drill " + " ".join(args), command)


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    replacements: tuple[Replacement, ...]
    checks: tuple[Check, ...]
    budget_s: float
    fast: bool = False


_POWER_LOSS_DRILL = Check.drill(
    "--faults", "power_loss", "--duration", "60", "--seed", "5",
    "--segments", "8", "--writers", "6", "--readers", "1",
)  # fmt: skip
# Tier 2 is the only copy of what was flushed within seconds (frequent checkpoints), so a
# Tier 2 that loses unsynced chunk bytes shows after the first power losses.
_SHORT_POWER_LOSS_DRILL = Check.drill(
    "--faults", "power_loss", "--duration", "30", "--seed", "5",
    "--segments", "8", "--writers", "6", "--readers", "1",
)  # fmt: skip
_STORE_POWER_LOSS = Check.pytest("tests/store/test_power_loss.py")
_TIER1_ROLLED_POWER_LOSS = Check.pytest(
    "tests/store/test_power_loss.py::test_appends_in_the_files_tier1_rolled_to_survive_a_power_loss"
)
_TIER2_POWER_LOSS = Check.pytest(
    "tests/store/test_power_loss.py::test_appends_only_tier2_holds_survive_a_power_loss"
)
# The test a Tier 2 mutant uses to tell a manifest from a chunk or an index (the layout's own
# suffix, so that a new layout cannot turn the mutant into the unmutated code unnoticed).
_IS_MANIFEST = f"path.endswith({MANIFEST_SUFFIX!r})"
_GROUP_COMMIT = "tier1/local/group_commit.py"

CATALOG: tuple[Mutant, ...] = (
    Mutant(
        "tier1-no-fdatasync",
        "the local Tier 1 acknowledges a batch without its fdatasync",
        (
            Replacement(
                _GROUP_COMMIT,
                "                self._syncs.submit(fd)\n",
                "                self._loop.call_soon(self._on_synced, 0)\n",
            ),
        ),
        (_STORE_POWER_LOSS, _POWER_LOSS_DRILL),
        budget_s=120,
        fast=True,
    ),
    Mutant(
        "tier1-ack-at-submission",
        "the local Tier 1 acknowledges a batch when its fdatasync is submitted, not done",
        (
            Replacement(
                _GROUP_COMMIT,
                "            self._syncing_to = target\n",
                "            self._syncing_to = target\n"
                "            self._on_progress(target, None)\n",
            ),
        ),
        (_STORE_POWER_LOSS, _POWER_LOSS_DRILL),
        budget_s=300,
    ),
    Mutant(
        "tier1-new-file-no-directory-fsync",
        "a new local Tier 1 file (the first, or a rolled one) is not fsynced into its directory",
        (
            Replacement(
                "tier1/local/directory.py",
                "            self.sync()\n        except BaseException:",
                "            pass\n        except BaseException:",
            ),
        ),
        (_STORE_POWER_LOSS, _POWER_LOSS_DRILL),
        budget_s=120,
        fast=True,
    ),
    Mutant(
        "tier1-rolled-file-no-directory-fsync",
        "a rolled local Tier 1 file is not fsynced into its directory (the first one is)",
        (
            Replacement(
                _GROUP_COMMIT,
                "        fd = self._directory.create_file(base)\n",
                "        fd = os.open(self._directory.file_path(base),"
                " os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)\n",
            ),
        ),
        (_TIER1_ROLLED_POWER_LOSS, _POWER_LOSS_DRILL),
        budget_s=60,
        fast=True,
    ),
    Mutant(
        "tier2-chunk-not-synced",
        "Tier 2 (file) chunks and their indexes are neither fsynced when created nor"
        " fdatasynced when appended to (manifests still are)",
        (
            Replacement(
                "tier2/file_storage.py",
                "                write_all(fd, 0, parts)\n                os.fsync(fd)\n",
                "                write_all(fd, 0, parts)\n"
                f"                if {_IS_MANIFEST}:\n"
                "                    os.fsync(fd)\n",
            ),
            Replacement("tier2/file_storage.py", "            os.fdatasync(fd)\n", ""),
        ),
        (_TIER2_POWER_LOSS, _SHORT_POWER_LOSS_DRILL),
        budget_s=60,
        fast=True,
    ),
    Mutant(
        "tier2-manifest-not-synced",
        "Tier 2 (file) manifests are not fsynced before they replace the old one",
        (
            Replacement(
                "tier2/file_storage.py",
                "                write_all(fd, 0, parts)\n                os.fsync(fd)\n",
                "                write_all(fd, 0, parts)\n"
                f"                if not {_IS_MANIFEST}:\n"
                "                    os.fsync(fd)\n",
            ),
        ),
        (_TIER2_POWER_LOSS, _POWER_LOSS_DRILL),
        budget_s=60,
        fast=True,
    ),
    Mutant(
        "tier1-truncated-past-needed-checkpoint",
        "the Durable Log truncates Tier 1 at its newest checkpoint, even one that operations"
        " not yet in Tier 2 precede",
        (
            Replacement(
                "segmentstore/logs/durable_log.py",
                "while checkpoints and (needed is None or checkpoints[0][0] < needed):",
                "while checkpoints:",
            ),
        ),
        (Check.pytest("tests/logs/test_durable_log_component.py"), _POWER_LOSS_DRILL),
        budget_s=90,
        fast=True,
    ),
    Mutant(
        "jetstream-ack-before-jetstream",
        "a JetStream Tier 1 record is acknowledged as soon as it is published, before"
        " JetStream's own acknowledgement",
        (
            Replacement(
                "tier1/jetstream/publisher.py",
                "                headers=message.headers,\n            )\n",
                "                headers=message.headers,\n            )\n"
                "            self._acknowledge(message, message.expected + 1)\n",
            ),
        ),
        (
            Check.pytest("tests/tier1/test_jetstream_log.py"),
            Check.drill(
                *("--tier1", "jetstream", "--faults", "jetstream_power_loss"),
                *("--duration", "60", "--seed", "5"),
                *("--segments", "6", "--writers", "6", "--readers", "1"),
            ),
        ),
        budget_s=420,
    ),
    Mutant(
        "eviction-drops-writer-ids",
        "a segment leaves memory with a manifest that keeps no writer sequences: a retry of an"
        " exactly-once append applied before the eviction is applied again",
        (
            Replacement(
                "segmentstore/writer/manifest_state.py",
                "        writers=dict(segment.writers),\n",
                "        writers={},\n",
            ),
        ),
        (
            Check.pytest(
                "tests/store/test_active_segments.py::"
                "test_an_evicted_segment_answers_every_call_as_before"
            ),
            Check.pytest("tests/integration/test_eviction_kill.py"),
        ),
        budget_s=60,
        fast=True,
    ),
    Mutant(
        "replay-past-a-gap",
        "recovery replays on past a record missing from the middle of Tier 1, serving its"
        " segment without the append it acknowledged",
        (
            Replacement(
                "segmentstore/logs/recovery.py",
                "            elif op.sequence != metadata.sequence + 1:\n",
                "            elif op.sequence <= metadata.sequence:\n",
            ),
        ),
        (
            Check.pytest(
                "tests/containers/test_container_component.py::"
                "test_a_log_that_lost_a_record_in_its_middle_is_not_replayed"
            ),
        ),
        budget_s=10,
        fast=True,
    ),
    Mutant(
        "tier2-trusts-an-unsynced-manifest",
        "the Storage Writer trusts a manifest that an owner killed mid-save left renamed into"
        " place but unsynced: it frees Tier 1 and evicts on it, and a power loss takes it back",
        (
            Replacement(
                "segmentstore/writer/segment_flusher.py",
                "        self._manifests.make_durable(self.name)\n",
                "",
            ),
        ),
        (Check.pytest("tests/writer/test_trusted_manifests.py"),),
        budget_s=20,
        fast=True,
    ),
    Mutant(
        "tier1-recovery-trusts-unsynced-records",
        "the local Tier 1 opens over records a killed writer left unsynced without syncing"
        " them: recovery builds on records a later power loss takes back",
        (
            Replacement(
                "tier1/local/recovery.py",
                "            _sync(path)\n            return size\n",
                "            return size\n",
            ),
        ),
        (
            Check.pytest(
                "tests/tier1/test_local_log_power_loss.py::"
                "test_records_a_killed_writer_left_unsynced_are_synced_when_the_log_opens"
            ),
        ),
        budget_s=60,
    ),
    Mutant(
        "load-trusts-an-unsynced-manifest",
        "an inactive segment is loaded back from a manifest an owner killed mid-save left"
        " unsynced: it takes appends on a state a power loss takes back",
        (
            Replacement(
                "segmentstore/containers/manifest_lookups.py",
                "                self._manifests.make_durable(name)\n",
                "                pass\n",
            ),
        ),
        (Check.pytest("tests/writer/test_trusted_manifests.py"),),
        budget_s=60,
    ),
)
