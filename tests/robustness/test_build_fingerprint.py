"""The build fingerprint: every input that decides what a build contains is in ``manifest.json`` and in the
hash that decides whether ``kwiki ingest`` rebuilds; changing any one of them rebuilds, changing none does not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kwiki.errors import BadRequest
from kwiki.index import bm25, build, manifest, vectors
from kwiki.index.build import build_fingerprint, build_index
from kwiki.ingest import chunking, corpus
from kwiki.ingest.corpus import CorpusRoot

from ..conftest import DATA

pytestmark = pytest.mark.slow

MAX_PAGE = 8 * 1024 * 1024

#: (module, attribute, changed value): each a build input the fingerprint must follow.
INPUTS = [
    (build, "__version__", "9.9.9"),
    (manifest, "SCHEMA_VERSION", 999),
    (chunking, "CHUNKER_VERSION", "999"),
    (vectors, "MAX_TOKENS", 128),
    (vectors, "EMBED_VERSION", 999),
    (build, "_NOT_FOR_MODEL", re.compile(r"^\s*$")),
    (chunking, "SENTENCE_TYPES", frozenset({"pattern"})),
    (chunking, "SENTENCE_MIN_WORDS", 3),
    (corpus, "MAX_QUESTIONS", 2),
    (bm25, "LAYOUT_VERSION", 999),
    (bm25, "FIELDS", (*bm25.FIELDS, "extra_field")),
    (vectors, "ANN_INDEX", "IVF_PQ"),
]


def _build(index_dir: Path, embedder, embed_cache: Path, **kwargs):
    return build_index(index_dir, [CorpusRoot("mini", DATA / "mini")], embedder=embedder, cache_dir=embed_cache,
                       skip_unchanged=True, **kwargs)


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder, embed_cache) -> Path:
    d = tmp_path_factory.mktemp("fingerprint-index")
    first = _build(d, embedder, embed_cache)
    assert not first.unchanged
    return d


def test_unchanged_inputs_do_not_rebuild(built, embedder, embed_cache):
    again = _build(built, embedder, embed_cache)
    assert again.unchanged
    assert again.manifest.fingerprint == build_fingerprint(MAX_PAGE, model=embedder.model_id)


def test_manifest_records_every_input(built):
    fp = manifest.read_manifest(build.current_build(built)).fingerprint
    assert set(fp) == {"kwiki_version", "schema_version", "chunker_version", "model", "embed_version", "embed_filter",
                       "sentence_types", "sentence_min_words", "questions", "bm25_layout", "max_page_bytes", "ann"}
    assert fp["chunker_version"] == chunking.CHUNKER_VERSION and fp["max_page_bytes"] == str(MAX_PAGE)
    # the size from which a build gets an approximate index decides what it holds
    assert build_fingerprint(MAX_PAGE, model=fp["model"].split(" ")[0], ann_min_rows=10)["ann"] != fp["ann"]


@pytest.mark.parametrize(("module", "name", "value"), INPUTS, ids=[f"{m.__name__.rsplit('.', 1)[-1]}.{n}" for m, n, _ in INPUTS])
def test_each_input_changes_the_fingerprint_and_rebuilds(built, embedder, embed_cache, monkeypatch, module, name, value):
    _build(built, embedder, embed_cache)  # back to the unpatched inputs (a previous case left its own build)
    before = _build(built, embedder, embed_cache)
    assert before.unchanged
    monkeypatch.setattr(module, name, value)
    assert build_fingerprint(MAX_PAGE, model=embedder.model_id) != before.manifest.fingerprint
    quick = build.source_hash([CorpusRoot("mini", DATA / "mini")],
                              build.fingerprint_hash(build_fingerprint(MAX_PAGE, model=embedder.model_id)))
    assert quick != before.manifest.source_hash
    after = _build(built, embedder, embed_cache)
    assert not after.unchanged and after.manifest.build_id != before.manifest.build_id


def test_build_parameters_and_caller_inputs_rebuild(built, embedder, embed_cache):
    assert not _build(built, embedder, embed_cache, max_page_bytes=MAX_PAGE // 2).unchanged
    assert not _build(built, embedder, embed_cache, fingerprint_extra={"adapter": "a1"}).unchanged
    res = _build(built, embedder, embed_cache, fingerprint_extra={"adapter": "a1"})
    assert res.unchanged and res.manifest.fingerprint["adapter"] == "a1"
    assert not _build(built, embedder, embed_cache, fingerprint_extra={"adapter": "a2"}).unchanged
    assert not _build(built, embedder, embed_cache).unchanged  # dropping the caller's input rebuilds too


def test_another_model_rebuilds(built, embedder, base_embedder, embed_cache):
    """The model id (the base model and the adapter folded into it) is the fingerprint's ``model``."""
    assert embedder.model_id != base_embedder.model_id
    _build(built, embedder, embed_cache)
    other = _build(built, base_embedder, embed_cache)
    assert not other.unchanged and other.manifest.fingerprint["model"].startswith(base_embedder.model_id + " ")
    assert _build(built, base_embedder, embed_cache).unchanged
    assert not _build(built, embedder, embed_cache).unchanged


def test_caller_inputs_cannot_shadow_built_in_ones():
    with pytest.raises(BadRequest, match="chunker_version"):
        build_fingerprint(MAX_PAGE, {"chunker_version": "0"})
