"""The approximate vector path end to end: a build of the real corpus with the threshold lowered gets lancedb IVF
indexes, records them in its manifest, and its searches agree with exact search over the same vectors."""

from __future__ import annotations

import numpy as np
import pytest

from kwiki.index import vectors
from kwiki.index.params import RankingParams

from ..conftest import REPO

pytestmark = pytest.mark.slow

QUERIES = [
    "only 8 of my 132 SMs are busy at the end of the kernel",
    "shared memory bank conflicts when loading a transposed tile",
    "how do I overlap TMA loads with wgmma on Hopper",
    "DRAM throughput is at 90 percent and vectorized stores did nothing",
    "register spills after unrolling the inner loop",
    "paged attention block tables in vLLM",
]


@pytest.fixture(scope="module")
def ann_searcher(tmp_path_factory, embedder, embed_cache):
    from kwiki.index.build import build_index
    from kwiki.index.search import Searcher
    from kwiki.ingest.corpus import corpus_root

    d = tmp_path_factory.mktemp("ann-index")
    result = build_index(d, [corpus_root(REPO / "corpus")], embedder=embedder, cache_dir=embed_cache, ann_min_rows=1000)
    return result, Searcher.open(d, embedder=embedder)


def test_a_build_over_the_threshold_records_and_opens_its_approximate_indexes(ann_searcher, searcher):
    result, ann = ann_searcher
    chunks = result.manifest.counts["chunks"]
    assert chunks >= 1000 and searcher.manifest.ann == {}  # the same corpus at the shipped threshold: exact
    assert result.manifest.ann[vectors.TABLE] == {"index": "ivf_flat", "rows": chunks,
                                                  "partitions": vectors.ann_partitions(chunks)}
    assert vectors.SENTENCES in result.manifest.ann
    assert isinstance(ann.vindex.ann_chunks, vectors.AnnTable) and isinstance(ann.vindex.ann_sentences, vectors.AnnTable)
    assert ann.search(QUERIES[0]).index["vector_search"].startswith("ivf_flat (chunks, sentences; nprobes")
    assert searcher.search(QUERIES[0]).index["vector_search"] == "exact"


def test_the_vector_stage_goes_through_lancedb_and_agrees_with_exact_search(ann_searcher, searcher, monkeypatch):
    _, ann = ann_searcher
    calls = []
    real = vectors.AnnTable.nearest
    monkeypatch.setattr(vectors.AnnTable, "nearest", lambda self, *a: calls.append(self.name) or real(self, *a))
    rng = np.random.default_rng(0)
    # seeded queries: noisy copies of random chunk vectors, and the real questions' vectors
    picks = ann.vindex.matrix[rng.choice(ann.vindex.matrix.shape[0], 20, replace=False)]
    noisy = picks + rng.normal(0, 0.03, picks.shape).astype(np.float32)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    qs = np.vstack([noisy, ann._embedder().encode(QUERIES)])
    params = RankingParams()
    recalls, scored = [], []
    for q in qs:
        got = [r for r, _ in ann.vindex.search(q, params.candidates, None, params, pages=ann.page_index)[:10]]
        want = [r for r, _ in searcher.vindex.search(q, params.candidates, None, params, pages=searcher.page_index)[:10]]
        recalls.append(len(set(got) & set(want)) / 10)
        scored.append(len(ann.vindex.ann_rows(q[None], params.candidates, None, params)))
    assert set(calls) == {vectors.TABLE, vectors.SENTENCES}
    assert np.mean(recalls) >= 0.95, recalls
    assert max(scored) < ann.vindex.matrix.shape[0]  # candidates, not every row
    # whole searches: the same first pages
    for text in QUERIES:
        a, e = ann.search(text), searcher.search(text)
        assert [h.id for h in a.hits[:3]] == [h.id for h in e.hits[:3]], text


def test_few_probes_score_fewer_rows_and_a_small_filter_is_searched_exactly(ann_searcher):
    _, ann = ann_searcher
    q = ann._embedder().encode(QUERIES[:1])
    wide = ann.vindex.ann_rows(q, 200, None, RankingParams())
    narrow = ann.vindex.ann_rows(q, 200, None, RankingParams(ann_nprobes=2))
    assert narrow is not None and wide is not None and len(narrow) <= len(wide)
    mask = ann._mask(ann.normalize_filters({"type": ["pattern"]}))
    assert mask is not None
    rows = ann.vindex.ann_rows(q, 200, mask[1], RankingParams())
    assert rows is not None and rows.tolist() == np.flatnonzero(mask[1]).tolist()  # fewer than the threshold: all of them
    hits = ann.search(QUERIES[0], filters={"type": ["pattern"]}).hits
    assert hits and all(h.type == "pattern" for h in hits)
