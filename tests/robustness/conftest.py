"""Fixtures for the robustness tests: a hostile corpus copied to tmp, and a helper to run the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import DATA, REPO

HOSTILE = DATA / "hostile"
OUTSIDE = DATA / "hostile_outside"
#: The 50 MB page of the issue: generated per test, never committed.
HUGE_PAGE_BYTES = 50 * 1024 * 1024
#: Written into every file outside the corpus root; it must never reach an index.
CANARY = "outsidecanary"


def make_hostile_corpus(base: Path) -> Path:
    """Copy the committed fixture to ``base`` and add what cannot (or should not) be committed.

    Layout: ``base/hostile`` is the corpus root, ``base/hostile_outside`` lies beside it, so the
    fixture's relative links out of the root still resolve to a real file with the canary.
    """
    root = base / "hostile"
    shutil.copytree(HOSTILE, root, symlinks=True)
    shutil.copytree(OUTSIDE, base / "hostile_outside", symlinks=True)
    secret = base / "hostile_outside" / "secret.md"
    patterns = root / "wiki" / "patterns"
    # A 50 MB page that is otherwise valid markdown: skipped by size, never read into memory whole.
    with open(patterns / "huge.md", "w", encoding="utf-8") as fh:
        fh.write("---\nid: pattern-hostile-huge\ntitle: Huge\n---\n\n# Huge\n\n")
        line = "warp stall " * 9 + "\n"
        fh.write(line * (HUGE_PAGE_BYTES // len(line) + 1))
    (patterns / "escape-absolute.md").symlink_to(secret.resolve())  # absolute link out of the root
    (patterns / "loop.md").symlink_to("loop.md")  # a link to itself
    (patterns / "dangling.md").symlink_to("does-not-exist.md")  # inside the root, but missing
    os.mkfifo(patterns / "fifo.md")  # reading it would block forever
    (root / "artifacts").symlink_to(base / "hostile_outside")  # a whole top folder linked out
    return root


#: Path in the hostile corpus -> a fragment of the reason the ingest must report for it.
EXPECTED_PROBLEMS = {
    "wiki/patterns/empty.md": "empty file",
    "wiki/patterns/binary-image.md": "binary file",
    "sources/docs/latin1.md": "not valid UTF-8",
    "wiki/patterns/malformed-yaml.md": "malformed YAML at line",
    "wiki/patterns/frontmatter-list.md": "frontmatter is a list",
    "wiki/patterns/unclosed.md": "never closed",
    "wiki/patterns/python-tag.md": "could not determine a constructor",
    "wiki/patterns/yaml-bomb.md": "alias-expansion bomb",
    "wiki/patterns/yaml-bomb-fanout.md": "alias-expansion bomb",
    "wiki/patterns/nested-header.md": "nested too deeply",
    "wiki/patterns/nested-block.md": "nested deeper than",
    "sources/prs/demo/PR-1.md": "id is a dict",
    "wiki/patterns/huge.md": "over the 8 MB page limit",
    "wiki/patterns/escape-relative.md": "outside the corpus root",
    "wiki/patterns/escape-absolute.md": "outside the corpus root",
    "sources/linked-folder": "symlinked folder not followed",
    "artifacts": "symlinked folder not followed",
    "wiki/patterns/loop.md": "symlink loop",
    "wiki/patterns/dangling.md": "missing file",
    "wiki/patterns/fifo.md": "not a regular file",
    "wiki/patterns/zz-collide.md": "duplicate id 'pattern-hostile-tail'",
}
#: The pages that must be served, and a query that finds each.
GOOD_PAGES = {
    "pattern-hostile-tail": "only a few SMs busy near the end, last wave partial",
    "hw-hostile-tmem": "tensor memory tcgen05.alloc",
    "pattern-hostile-frontmatter-only": "frontmatter-only pages are served from their fields",
    "pattern-hostile-odd-types": "oddtypesmarker",
    "doc-hostile-nested-body": "deeply nested markdown lists warp specialization",
}


@pytest.fixture
def hostile_corpus(tmp_path) -> Path:
    return make_hostile_corpus(tmp_path)


def kwiki_cmd(*args: str) -> list[str]:
    """The real ``kwiki`` console script of this venv (through ``python -m`` so no PATH is needed)."""
    return [sys.executable, "-c", "from kwiki.service.cli import main; main()", *args]


def cli_env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("KWIKI_INDEX_DIR", None)
    return env


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(kwiki_cmd(*args), capture_output=True, text=True, timeout=timeout, env=cli_env(), cwd=REPO)
