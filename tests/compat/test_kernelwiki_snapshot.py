"""Ingest the project corpus together with the public KernelWiki snapshot (skipped when ../shared is absent)."""

import pytest

from ..conftest import REPO, SHARED

pytestmark = [pytest.mark.slow, pytest.mark.shared,
              pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/kernelwiki-snapshot is not present")]


@pytest.fixture(scope="module")
def combined(tmp_path_factory, embedder, embed_cache):
    from kwiki.index.build import build_index
    from kwiki.index.search import Searcher
    from kwiki.ingest.corpus import corpus_root

    d = tmp_path_factory.mktemp("combined")
    result = build_index(d, [corpus_root(REPO / "corpus"), corpus_root(SHARED)], embedder=embedder, cache_dir=embed_cache)
    return result, Searcher.open(d, embedder=embedder)


def test_report_covers_both_corpora(combined):
    result, _ = combined
    rep = result.report
    assert set(rep.corpora) == {"kwiki", "kernelwiki-snapshot"}
    assert rep.pages_by_type["source-pr"] > 2600 and rep.pages_by_type["pattern"] >= 30 + 7
    assert rep.chunks > rep.pages
    # the snapshot shares some ids with our corpus (the same PR, say): reported, both kept
    assert all("served as" in w.reason for w in rep.warnings)


def test_long_scoreboard_finds_latency_pages_not_longcat(combined):
    _, s = combined
    hits = s.search("long scoreboard", k=10).hits
    assert "scoreboard" in hits[0].page_id
    assert not any("longcat" in h.title.lower() or "long context" in h.title.lower() for h in hits[:5])


def test_hits_carry_their_corpus_and_snapshot_pages_are_found(combined):
    _, s = combined
    hits = s.search("FlashAttention-4 on Blackwell", k=10).hits
    assert {h.corpus for h in hits} <= {"kwiki", "kernelwiki-snapshot"}
    assert any(h.corpus == "kernelwiki-snapshot" and h.type == "kernel" for h in hits)
    only_kw = s.search("tail effect", k=5, filters={"corpus": ["kernelwiki-snapshot"]}).hits
    assert only_kw and all(h.corpus == "kernelwiki-snapshot" for h in only_kw)
    assert only_kw[0].page_id == "pattern-tail-effect"


def test_curated_pages_are_not_buried_under_prs(combined):
    _, s = combined
    hits = s.search("persistent kernel tile scheduler", k=5).hits
    assert sum(h.type == "source-pr" for h in hits) <= 2


def test_ncu_vocabulary_routes_on_the_snapshot_alone(combined):
    _, s = combined
    hits = s.search("stall long scoreboard", k=3, filters={"corpus": ["kernelwiki-snapshot"]}).hits
    assert hits and hits[0].type in {"pattern", "technique"}
