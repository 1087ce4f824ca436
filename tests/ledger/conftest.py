"""Fixtures for the ledger tests: a writable copy of the fixture workspace, and indexes that include it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import DATA, REPO

LEDGER = DATA / "ledger"


@pytest.fixture()
def workspace(tmp_path) -> Path:
    """A writable copy of tests/data/ledger (36 candidates over two tasks, one malformed line)."""
    dest = tmp_path / "ws"
    shutil.copytree(LEDGER, dest, ignore=shutil.ignore_patterns("*.py"))
    return dest


@pytest.fixture(scope="session")
def ledger_mini_index(tmp_path_factory, embedder, embed_cache) -> Path:
    """tests/data/mini plus the fixture ledger, really built (candidates as type `experience`)."""
    from kwiki.index.build import build_index
    from kwiki.ingest.corpus import CorpusRoot
    from kwiki.ledger import ledger_source

    source, _ = ledger_source([LEDGER])
    d = tmp_path_factory.mktemp("ledger-mini-index")
    build_index(d, [CorpusRoot("mini", DATA / "mini")], embedder=embedder, cache_dir=embed_cache, page_sources=[source])
    return d


@pytest.fixture(scope="session")
def ledger_corpus_index(tmp_path_factory, corpus_index, embedder, embed_cache) -> Path:
    """The project's corpus plus the fixture ledger (after corpus_index, so only the candidates are embedded)."""
    from kwiki.index.build import build_index
    from kwiki.ingest.corpus import corpus_root
    from kwiki.ledger import ledger_source

    source, _ = ledger_source([LEDGER])
    d = tmp_path_factory.mktemp("ledger-corpus-index")
    build_index(d, [corpus_root(REPO / "corpus")], embedder=embedder, cache_dir=embed_cache, page_sources=[source])
    return d
