"""Fixtures for the fleet tests: two real builds of a small corpus, published into a builds store."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import DATA

#: A page only the second build has: a search for it tells the builds apart by their answers too.
ADDED = "---\nid: pattern-fleet-added\ntitle: Fleet rollout marker page\n---\n\n# Added\n\nRollout marker: tail effect note.\n"


@dataclass
class Builds:
    index_dir: Path
    store: Path
    old: str  # the first build (the mini corpus)
    new: str  # the second (the mini corpus and one page more)


@pytest.fixture(scope="session")
def builds(tmp_path_factory, embedder, embed_cache) -> Builds:
    from kwiki.index.build import build_index
    from kwiki.index.publish import publish
    from kwiki.ingest.corpus import CorpusRoot

    base = tmp_path_factory.mktemp("fleet")
    corpus = base / "corpus"
    shutil.copytree(DATA / "mini", corpus)
    index_dir, store = base / "index", base / "builds"
    old = build_index(index_dir, [CorpusRoot("mini", corpus)], embedder=embedder, cache_dir=embed_cache).manifest.build_id
    (corpus / "wiki" / "patterns" / "fleet-added.md").write_text(ADDED, encoding="utf-8")
    new = build_index(index_dir, [CorpusRoot("mini", corpus)], embedder=embedder, cache_dir=embed_cache).manifest.build_id
    for build_id in (old, new):
        publish(index_dir, store, build_id)
    return Builds(index_dir=index_dir, store=store, old=old, new=new)
