"""The build streams: pages are read, chunked, embedded and written batch by batch (``index.writer``), so a batch's
vectors are in the lancedb table before the last file is read, and batching changes nothing in what is built."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from kwiki.index import vectors
from kwiki.index import writer as writer_mod
from kwiki.index.build import build_index
from kwiki.ingest.corpus import CorpusRoot

from ..conftest import DATA

pytestmark = pytest.mark.slow


def _build(index_dir, embedder, embed_cache, **kwargs):
    return build_index(index_dir, [CorpusRoot("mini", DATA / "mini")], embedder=embedder, cache_dir=embed_cache, **kwargs)


def test_batches_are_written_while_the_corpus_is_still_being_read(tmp_path, embedder, embed_cache, monkeypatch):
    whole = _build(tmp_path / "whole", embedder, embed_cache)  # one batch: the mini corpus is under BATCH_PAGES
    monkeypatch.setattr(writer_mod, "BATCH_PAGES", 2)
    read: list[int] = []
    written: list[tuple[int, int]] = []  # (files read when a batch of chunk vectors was appended, rows in it)
    add = vectors.TableWriter.add

    def spy(self, columns, vecs):
        if self.name == vectors.TABLE:
            written.append((read[-1], len(vecs)))
        return add(self, columns, vecs)

    monkeypatch.setattr(vectors.TableWriter, "add", spy)
    streamed = _build(tmp_path / "streamed", embedder, embed_cache,
                      progress=lambda stage, done, total: read.append(done) if stage == "read" else None)
    pages = streamed.manifest.counts["pages"]
    assert pages >= 4 and len(written) == -(-pages // 2)
    assert written[0][0] < read[-1]  # the first batch was in the table before the last file was read
    # each append holds the chunks of two consecutive pages, no more
    per_page = Counter(json.loads(line)["page_key"] for line in (streamed.path / "chunks.jsonl").open())
    order = list(dict.fromkeys(json.loads(line)["id"] for line in (streamed.path / "pages.jsonl").open()))
    assert [n for _, n in written] == [sum(per_page[k] for k in order[i:i + 2]) for i in range(0, pages, 2)]
    # and batching changes nothing that is built
    for name in ("pages.jsonl", "chunks.jsonl", "artifacts.json", "vocab.json"):
        assert (streamed.path / name).read_text() == (whole.path / name).read_text(), name
    assert streamed.manifest.corpus_hash == whole.manifest.corpus_hash
    assert streamed.manifest.counts == whole.manifest.counts
    a, b = vectors.load_matrix(streamed.path / "vectors"), vectors.load_matrix(whole.path / "vectors")
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    sa, sb = vectors.load_sentences(streamed.path / "vectors"), vectors.load_sentences(whole.path / "vectors")
    assert all(np.array_equal(x, y) for x, y in zip(sa, sb) if isinstance(x, np.ndarray)) and sa[1] == sb[1]


def test_a_rebuild_takes_every_vector_from_the_cache(tmp_path, embedder, embed_cache):
    first = _build(tmp_path / "i", embedder, embed_cache)
    again = _build(tmp_path / "i", embedder, embed_cache, fingerprint_extra={"force": "1"})
    assert again.manifest.build_id != first.manifest.build_id and again.manifest.embedded == 0
    assert _build(tmp_path / "i", embedder, embed_cache, fingerprint_extra={"force": "1"}, skip_unchanged=True).unchanged


def test_the_embedding_cache_imports_an_earlier_npz_cache(tmp_path):
    keys = np.array(["a" * 64, "b" * 64], dtype="U64")
    vecs = np.eye(2, vectors.DIM, dtype=np.float32)
    np.savez(tmp_path / f"embeddings-minilm-l6-v2-e{vectors.EMBED_VERSION}.npz", keys=keys, vectors=vecs)
    cache = vectors.EmbeddingCache(tmp_path)
    assert cache.missing(["a" * 64, "c" * 64, "a" * 64]) == ["c" * 64]
    assert np.array_equal(cache.get(["b" * 64, "a" * 64]), vecs[::-1])
    cache.add(["c" * 64], vecs[:1])
    assert vectors.EmbeddingCache(tmp_path).missing(["c" * 64]) == []  # stored on add, seen by another process
