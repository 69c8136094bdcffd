"""The docs run as written: every shell and Python block of README.md, docs/*.md and the chart's
README, page by page, from a fresh directory outside the clone (tests/support/doc_blocks.py
says how blocks are marked, doc_runner.py how a page is run).

A page passes when none of its commands fails, no answer is an error document, it leaves no
process running, and the clone's ``git status`` is what it was before.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from doc_blocks import REPO, Block, blocks, pages
from doc_runner import run_page, syntax_error

# A page's whole run, its servers' starts and stops included; the slowest (operations.md, with
# a drill) takes about half a minute on a loaded 2-core machine.
PAGE_TIMEOUT_S = 300


def _runnable_pages() -> list[Path]:
    return [page for page in pages() if any(b.marker is None for b in blocks(page))]


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout


def _network_namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--net", "true"], capture_output=True, text=True, check=False
    )
    return probe.returncode == 0


needs_netns = pytest.mark.skipif(
    not _network_namespaces_work(),
    reason="the docs name fixed ports (9090, ...): their pages run in a network namespace of "
    "their own, which needs `unshare --net` (root)",
)


def test_every_block_parses() -> None:
    """Marked blocks included: a block that only a syntax check can reach still parses."""
    errors = [e for page in pages() for b in blocks(page) if (e := syntax_error(b))]
    assert not errors, "\n".join(errors)


def test_the_readme_is_a_landing_page() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move detail into docs/"


def test_every_page_the_readme_names_exists() -> None:
    text = (REPO / "README.md").read_text()
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in text, f"the README's map does not name {page.name}"


@pytest.mark.slow
@pytest.mark.integration
@needs_netns
@pytest.mark.parametrize("page", _runnable_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    assert REPO not in tmp_path.parents, "the page must run outside the clone"
    before = _git_status()
    run = run_page(blocks(page), tmp_path, PAGE_TIMEOUT_S)
    assert not run.timed_out, run.report()
    assert not run.failures, run.report()
    assert not run.leftovers, f"the page does not stop what it starts\n{run.report()}"
    assert '{"error":' not in run.stdout, f"an answer was an error\n{run.report()}"
    assert _git_status() == before, "the page wrote into the clone"


@pytest.mark.slow
@pytest.mark.integration
@needs_netns
def test_the_readme_cluster_example_run_in_the_clone_leaves_it_clean(tmp_path: Path) -> None:
    """A user runs it from the clone, where `make install` left them: its files go elsewhere."""
    cluster = [b for b in blocks(REPO / "README.md") if "--cluster" in b.text and b.marker is None]
    assert len(cluster) == 1
    before = _git_status()
    run = run_page(cluster, tmp_path, PAGE_TIMEOUT_S, cwd=REPO)
    assert not run.failures and not run.leftovers and not run.timed_out, run.report()
    assert _git_status() == before, "the cluster example wrote into the clone"


@pytest.mark.slow
@pytest.mark.integration
@needs_netns
def test_the_readme_cluster_example_names_a_taken_port_and_stops_what_it_started(
    tmp_path: Path,
) -> None:
    """Port 9092 taken by another web server before the example runs: it says so before
    starting anything, the node that cannot listen there says why in one line, and the
    example neither hangs nor leaves a process running."""
    readme = REPO / "README.md"
    cluster = [b for b in blocks(readme) if "--cluster" in b.text and b.marker is None]
    take = "python3 -m http.server 9092 --bind 127.0.0.1 > /dev/null 2>&1 &\ntaker=$!\nsleep 1\n"
    taker = Block(readme, 0, "sh", take)
    release = Block(readme, 0, "sh", "kill $taker; wait $taker\n")
    run = run_page([taker, *cluster, release], tmp_path, PAGE_TIMEOUT_S)
    assert not run.timed_out and not run.leftovers, run.report()
    assert "port 9092 is taken: stop what uses it, or change it below" in run.stdout
    assert [line for line in run.stdout.splitlines() if "is taken" in line] == [
        "port 9092 is taken: stop what uses it, or change it below"
    ]
    refusal = (
        "segmentstore serve: cannot listen on 127.0.0.1:9092: another process listens on that"
        " port: stop it, or choose another port with --port (api.port)"
    )
    assert refusal in run.stdout, run.report()


def test_blocks_and_their_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        textwrap.dedent(
            """\
            # A page

            ```sh
            echo one
            ```

            <!-- docs-test: syntax-only (needs a Kubernetes cluster) -->
            ```bash
            kubectl get pods
            ```

            - a list item:

              ```python
              print("indented")
              ```

            <!-- docs-test: spark -->
            ```python
            spark.read
            ```

            ```json
            {"not": "code"}
            ```
            """
        )
    )
    assert blocks(page) == [
        Block(page, 3, "sh", "echo one\n"),
        Block(page, 8, "sh", "kubectl get pods\n", "syntax-only", "needs a Kubernetes cluster"),
        Block(page, 14, "python", 'print("indented")\n'),
        Block(page, 19, "python", "spark.read\n", "spark"),
    ]


@pytest.mark.parametrize(
    "marker",
    [
        "<!-- docs-test: sytnax-only (typo) -->",  # a misspelt marker must not skip silently
        "<!-- docs-test: syntax-only -->",  # a block not run must say why
    ],
)
def test_a_bad_marker_is_refused(tmp_path: Path, marker: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"{marker}\n```sh\necho one\n```\n")
    with pytest.raises(ValueError, match=r"docs-test|say why"):
        blocks(page)


def test_a_marker_away_from_a_fence_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: syntax-only (x) -->\n\n```sh\necho one\n```\n")
    with pytest.raises(ValueError, match="right before a fence"):
        blocks(page)
