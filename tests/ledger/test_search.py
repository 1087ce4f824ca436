"""Candidates in retrieval: their own `experience` tier, found with their status, counted per page."""

from __future__ import annotations

import pytest

from kwiki.ledger import Ledger, indexed_candidates, ledger_summary, page_id
from kwiki.service.core import SearchRequest, page_view, run_search, tiered_search
from kwiki.settings import Settings

from .conftest import LEDGER

pytestmark = pytest.mark.slow
BANKS = "bank conflicts in the transpose kernel"
FAILED = "what was already tried and failed"


@pytest.fixture(scope="module")
def mini(ledger_mini_index, embedder):
    from kwiki.index.search import Searcher

    return Searcher.open(ledger_mini_index, embedder=embedder)


@pytest.fixture(scope="module")
def full(ledger_corpus_index, embedder):
    from kwiki.index.search import Searcher

    return Searcher.open(ledger_corpus_index, embedder=embedder)


def _summary(searcher, page_id_):
    """A page view's summary of candidates, from the candidates the index holds."""
    return ledger_summary(page_id_, indexed_candidates(searcher.pages.values()), searcher.find_page(page_id_))


def _tiers(searcher, q, k=5, status=None):
    return tiered_search(searcher, SearchRequest(q=q, k=k), Settings(), experience_k=5, status=status)


def test_every_good_candidate_is_an_experience_page(mini):
    cands = Ledger(LEDGER).read().candidates
    pages = {k: p for k, p in mini.pages.items() if p.type == "experience"}
    assert set(pages) == {page_id(c) for c in cands}
    t04 = mini.page("cand-transpose-t04")
    assert t04.title.startswith("[rejected] XOR-swizzle")
    assert "Rejected: tried and failed" in t04.body and "harder to read" in t04.body
    assert t04.frontmatter["ledger"]["parent"] == "t01" and t04.frontmatter["status"] == "rejected"
    assert [r.id for r in t04.related] == ["technique-smem-swizzling", "pattern-shared-memory-bank-conflicts"]


def test_search_finds_the_candidates_that_tried_a_fix_with_their_status(mini):
    resp = mini.search(BANKS, k=10)
    exp = [h for h in resp.hits if h.type == "experience"]
    assert exp and all(h.why.type_prior == 0.7 for h in exp)
    top = {h.page_id for h in exp[:5]}
    assert "cand-transpose-t03" in top  # the padding that fixed the conflicts
    assert all(h.page_id.startswith("cand-transpose-") for h in exp[:5])
    assert all(h.title.startswith(("[promoted]", "[rejected]", "[candidate]")) for h in exp)


def test_what_was_tried_and_failed(mini):
    hits = mini.search(FAILED, k=5, filters={"type": ["experience"]}).hits
    statuses = [mini.pages[h.id].meta["status"] for h in hits]
    assert statuses.count("rejected") >= 3, statuses
    rejected = sum(1 for c in Ledger(LEDGER).read().candidates if c.status == "rejected")
    only = mini.search(FAILED, k=30, filters={"type": ["experience"], "tag": ["rejected"]}).hits
    assert len(only) == rejected and {mini.pages[h.id].meta["status"] for h in only} == {"rejected"}
    tiers = _tiers(mini, "tried to fix the bank conflicts and failed", status="rejected")
    assert tiers["experience"]["hits"][0]["candidate"] in {"transpose/t04", "transpose/t16", "gemm-bf16/g13", "transpose/t10"}
    assert {h["status"] for h in tiers["experience"]["hits"]} == {"rejected"}


def test_page_summary_counts_promoted_and_rejected(mini):
    s = _summary(mini, "technique-smem-swizzling")
    assert s["counts"] == {"promoted": 0, "rejected": 3, "candidate": 1}
    assert {c["key"] for c in s["candidates"]} == {"transpose/t04", "transpose/t16", "gemm-bf16/g13", "transpose/t12"}
    tail = _summary(mini, "pattern-tail-effect")
    assert tail["counts"] == {"promoted": 1, "rejected": 2, "candidate": 0}
    assert _summary(mini, "technique-nothing")["total"] == 0


def test_full_corpus_pages_first_then_candidates(full):
    """The acceptance query on the real corpus: explaining pages, then the candidates with their outcome."""
    tiers = _tiers(full, BANKS, k=5)
    pages = [h["page_id"] for h in tiers["pages"]["hits"]]
    assert "pattern-shared-memory-bank-conflicts" in pages[:3]
    assert "kernel-transpose" in pages
    exp = tiers["experience"]["hits"]
    assert [h["candidate"] for h in exp][:1] == ["transpose/t03"]
    assert all(h["task"] == "transpose" for h in exp)
    assert {h["status"] for h in exp} >= {"promoted", "rejected"}
    assert all(h["reason"] for h in exp if h["status"] == "rejected")


def test_candidates_never_outrank_curated_pages_of_equal_relevance(full):
    hits = full.search(BANKS, k=30).hits
    first_exp = next(i for i, h in enumerate(hits) if h.type == "experience")
    assert first_exp >= 5 and all(h.type != "experience" for h in hits[:first_exp])
    summary = _summary(full, "technique-shared-memory-padding")
    assert summary["counts"] == {"promoted": 2, "rejected": 1, "candidate": 0}
    assert summary["page_id"] == "technique-shared-memory-padding"


def test_failed_attempts_for_a_topic_on_the_full_corpus(full):
    tiers = _tiers(full, "what was already tried and failed for the tail effect", status="rejected")
    got = [h["candidate"] for h in tiers["experience"]["hits"]]
    assert set(got[:2]) == {"gemm-bf16/g07", "transpose/t13"}  # the two rejected tail-effect fixes


def test_plain_search_carries_the_experience_tier_and_page_view_the_counts(full):
    """GET /search's own code path: curated pages in `hits`, candidates with their status in `experience`."""
    resp = run_search(full, SearchRequest(q=BANKS, k=5), Settings())
    assert "pattern-shared-memory-bank-conflicts" in [h.page_id for h in resp.hits[:2]]
    assert all(h.type != "experience" for h in resp.hits[:3])
    assert resp.experience and all(e["status"] in {"promoted", "rejected", "candidate"} for e in resp.experience)
    page = page_view(full, "pattern-shared-memory-bank-conflicts")
    assert page.ledger is not None and page.ledger["total"] >= 1
    assert full.page("pattern-shared-memory-bank-conflicts").ledger is None  # the index knows nothing of the ledger
