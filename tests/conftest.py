"""Session-scoped fixtures: the real model, real indexes built once, the real app in process and on a port."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The console script lives beside the interpreter running the tests (`.venv/bin/python -m pytest`
# works without an activated venv).
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SHARED = REPO.parent / "shared" / "kernelwiki-snapshot"


@pytest.fixture(scope="session")
def embed_cache(tmp_path_factory) -> Path:
    """One embedding cache for every index the tests build (each chunk is embedded once)."""
    return tmp_path_factory.mktemp("embed-cache")


@pytest.fixture(scope="session")
def embedder():
    """The model kwiki ships: MiniLM with the shipped domain adapter folded in."""
    from kwiki.index.vectors import Embedder
    from kwiki.settings import Settings

    return Embedder(threads=2, adapter=Settings().embed_adapter)


@pytest.fixture(scope="session")
def base_embedder():
    """all-MiniLM-L6-v2 as published, no adapter (compared with sentence-transformers' own vectors)."""
    from kwiki.index.vectors import Embedder

    return Embedder(threads=2)


@pytest.fixture(scope="session")
def mini_index(tmp_path_factory, embedder, embed_cache) -> Path:
    from kwiki.index.build import build_index
    from kwiki.ingest.corpus import CorpusRoot

    d = tmp_path_factory.mktemp("mini-index")
    build_index(d, [CorpusRoot("mini", DATA / "mini")], embedder=embedder, cache_dir=embed_cache)
    return d


@pytest.fixture(scope="session")
def corpus_index(tmp_path_factory, embedder, embed_cache) -> Path:
    """The project's own corpus, really built (tantivy + lancedb + MiniLM)."""
    from kwiki.index.build import build_index
    from kwiki.ingest.corpus import corpus_root

    d = tmp_path_factory.mktemp("corpus-index")
    build_index(d, [corpus_root(REPO / "corpus")], embedder=embedder, cache_dir=embed_cache)
    return d


@pytest.fixture(scope="session")
def searcher(corpus_index, embedder):
    from kwiki.index.search import Searcher

    return Searcher.open(corpus_index, embedder=embedder)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerThread:
    """uvicorn serving the real app on a loopback port, in a thread of the test process."""

    def __init__(self, app) -> None:
        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def server(corpus_index):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    settings = Settings(index_dir=corpus_index, admin_token="test-token")
    with ServerThread(create_app(settings)) as srv:
        yield srv


@pytest.fixture(scope="session")
def http(corpus_index):
    """The real app in process, through its ASGI interface (no socket): what the API tests use. The end-to-end
    tests (browser, MCP, SKILL.md's commands, the HTTP fuzzer) keep the real server on a port (``server``)."""
    from fastapi.testclient import TestClient

    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    app = create_app(Settings(index_dir=corpus_index, admin_token="test-token"))
    with TestClient(app, raise_server_exceptions=False) as client:  # a 500 is an answer to check, not a crash
        yield client
