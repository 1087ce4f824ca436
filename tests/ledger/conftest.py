"""Fixtures for the ledger tests: the fixture workspace, a fresh ledger on each backend, and indexes.

``make_ledger`` is parametrized over both backends: a test that takes it runs once on a workspace's SQLite file
and once on a real PostgreSQL server (a throwaway cluster started for the session by
:class:`benchmarks.ledger_load.PgCluster`; each ledger gets a schema of its own). Where PostgreSQL cannot start
(no binaries), the PostgreSQL half is skipped with the reason.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable, Iterator

import pytest

from benchmarks.ledger_load import ClusterUnavailable, PgCluster
from tests.conftest import DATA, REPO

LEDGER = DATA / "ledger"
BACKENDS = ("sqlite", "postgres")


@pytest.fixture()
def workspace(tmp_path) -> Path:
    """A writable copy of tests/data/ledger (36 candidates over two tasks, one malformed line), JSONL as written before
    the database: its first write imports it."""
    dest = tmp_path / "ws"
    shutil.copytree(LEDGER, dest, ignore=shutil.ignore_patterns("*.py"))
    return dest


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """A real PostgreSQL server for the session (fsync off: a test cluster, thrown away)."""
    cluster = PgCluster(fsync=False)
    try:
        cluster.start()
    except (ClusterUnavailable, OSError) as exc:
        cluster.stop()
        pytest.skip(f"PostgreSQL cannot start here: {exc} (`.ci/run` installs Debian's postgresql package)")
    yield cluster
    cluster.stop()


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return str(request.param)


@pytest.fixture()
def make_ledger(backend, request, tmp_path) -> Callable[..., object]:
    """``make_ledger()`` -> a new, empty :class:`kwiki.ledger.Ledger` on the test's backend (``make_ledger("b")``: a
    second one)."""
    from kwiki.ledger import Ledger

    made: list[Ledger] = []

    def make(name: str = "ws") -> Ledger:
        if backend == "sqlite":
            led = Ledger(tmp_path / name)
        else:
            led = Ledger(url=request.getfixturevalue("pg_cluster").new_schema())
        made.append(led)
        return led

    yield make
    for led in made:
        led.close()


@pytest.fixture()
def fixture_ledger(make_ledger):
    """The fixture workspace's 36 candidates imported into a new ledger of the test's backend."""
    from kwiki.ledger import import_dir

    led = make_ledger()
    import_dir(led, LEDGER)
    return led


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
