"""Candidates in retrieval: the ledger is its own retrieval source. ``/search`` gets its experience tier from the
ledger's text index in the same request (one corpus search), with every filter; a new candidate is found at once."""

from __future__ import annotations

import pytest

from kwiki.errors import UnknownReference
from kwiki.service.core import SearchRequest, add_candidate, index_page_ids, page_view, run_search, tiered_search
from kwiki.settings import Settings

pytestmark = pytest.mark.slow
BANKS = "bank conflicts in the transpose kernel"


@pytest.fixture(scope="module")
def full(corpus_index, embedder):
    from kwiki.index.search import Searcher

    return Searcher.open(corpus_index, embedder=embedder)


def _tiers(searcher, ledger, q, k=5, status=None, **filters):
    return tiered_search(searcher, SearchRequest(q=q, k=k, **filters), Settings(), experience_k=5, status=status, ledger=ledger)


def test_pages_first_then_the_candidates_that_tried_a_fix(full, fixture_ledger):
    tiers = _tiers(full, fixture_ledger, BANKS)
    pages = [h["page_id"] for h in tiers["pages"]["hits"]]
    assert "pattern-shared-memory-bank-conflicts" in pages[:3] and "kernel-transpose" in pages
    exp = tiers["experience"]["hits"]
    assert "transpose/t03" in [h["candidate"] for h in exp][:3]  # the padding that fixed the conflicts
    assert all(h["task"] == "transpose" for h in exp)
    assert {h["status"] for h in exp} >= {"promoted", "rejected"}
    assert all(h["reason"] for h in exp if h["status"] == "rejected")
    assert tiers["experience"]["total_candidates"] == 36


def test_what_was_tried_and_failed_for_a_topic(full, fixture_ledger):
    tiers = _tiers(full, fixture_ledger, "what was already tried and failed for the tail effect", status="rejected")
    got = [h["candidate"] for h in tiers["experience"]["hits"]]
    assert set(got[:2]) == {"gemm-bf16/g07", "transpose/t13"}  # the two rejected tail-effect fixes
    assert {h["status"] for h in tiers["experience"]["hits"]} == {"rejected"}


def test_plain_search_carries_the_tier_from_one_corpus_search(full, fixture_ledger, monkeypatch):
    calls: list[str] = []
    real = type(full).search

    def counted(self, q, *args, **kwargs):
        calls.append(q)
        return real(self, q, *args, **kwargs)

    monkeypatch.setattr(type(full), "search", counted)
    resp = run_search(full, SearchRequest(q=BANKS, k=5), Settings(), ledger=fixture_ledger)
    assert calls == [BANKS]  # the experience tier cost no second corpus search
    assert "pattern-shared-memory-bank-conflicts" in [h.page_id for h in resp.hits[:2]]
    assert all(h.type != "experience" for h in resp.hits)  # the index holds no candidates: they are only in the tier
    assert resp.experience and all(e["status"] in {"promoted", "rejected", "candidate"} for e in resp.experience)
    assert run_search(full, SearchRequest(q=BANKS, k=5), Settings()).experience == []  # no ledger, no tier


def test_page_view_counts_how_its_candidates_fared(full, fixture_ledger):
    page = page_view(full, "technique-shared-memory-padding", fixture_ledger)
    assert page.ledger["counts"] == {"promoted": 2, "rejected": 1, "candidate": 0}
    assert [c["id"] for c in page.ledger["candidates"]] == ["t03", "t11", "t05"]  # promoted first
    swz = page_view(full, "technique-smem-swizzling", fixture_ledger).ledger
    assert swz["counts"] == {"promoted": 0, "rejected": 3, "candidate": 1}
    assert page_view(full, "technique-shared-memory-padding").ledger is None  # the index knows nothing of the ledger


def test_every_search_filter_applies_to_the_tier(full, fixture_ledger):
    def tier(**filters):
        return [h["candidate"] for h in run_search(full, SearchRequest(q="tile", k=5, **filters), Settings(), ledger=fixture_ledger).experience]

    assert tier() and tier(tag=["rejected"])
    assert all(fixture_ledger.get(k).status == "rejected" for k in tier(tag=["rejected"]))
    b200 = tier(architecture=["B200"])  # only candidates benchmarked on a Blackwell GPU
    assert b200 and all(any(b.gpu == "B200" for b in fixture_ledger.get(k).benchmarks) for k in b200)
    assert tier(corpus=["kwiki"]) == [] and tier(language=["cuda"]) == [] and tier(type=["pattern"]) == []
    only = run_search(full, SearchRequest(q="tile", k=8, type=["experience"]), Settings(), ledger=fixture_ledger)
    assert only.hits == [] and len(only.experience) == 8  # the ledger's tier alone, k of them
    assert run_search(full, SearchRequest(q="tile", k=3, corpus=["ledger"]), Settings(), ledger=fixture_ledger).experience


def test_a_candidate_added_is_searchable_at_once(full, fixture_ledger):
    """No rebuild, no reload: the next search finds it, and a page view counts it."""
    from kwiki.ledger import Candidate

    q = "ping-pong tensor memory accumulators across two CTAs"
    assert "gemm-bf16/g30" not in [h["candidate"] for h in run_search(full, SearchRequest(q=q), Settings(), ledger=fixture_ledger).experience]
    ids = index_page_ids(Settings(), full)
    add_candidate(fixture_ledger, Candidate(id="g30", task="gemm-bf16", parent="g10", kernel="gemm_wgmma", mechanism=q,
                                            techniques=["technique-ping-pong-scheduling"], status="rejected", reason="no gain"), ids)
    hits = run_search(full, SearchRequest(q=q), Settings(), ledger=fixture_ledger).experience
    assert hits[0]["candidate"] == "gemm-bf16/g30" and hits[0]["status"] == "rejected"
    assert "gemm-bf16/g30" in [c["key"] for c in page_view(full, "technique-ping-pong-scheduling", fixture_ledger).ledger["candidates"]]


def test_unknown_parent_and_technique_ids_are_refused_with_the_nearest(full, fixture_ledger):
    from kwiki.ledger import Candidate

    ids = index_page_ids(Settings(), full)
    with pytest.raises(UnknownReference) as exc:
        add_candidate(fixture_ledger, Candidate(id="z1", task="transpose", parent="t99"), ids)
    assert "unknown parent 't99'" in exc.value.message and exc.value.hint.startswith("nearest: transpose/t")
    with pytest.raises(UnknownReference) as exc:
        add_candidate(fixture_ledger, Candidate(id="z1", task="transpose", techniques=["technique-shared-memory-paddin"]), ids)
    assert exc.value.hint.startswith("nearest: technique-shared-memory-padding")
    with pytest.raises(UnknownReference, match="unknown pattern id"):
        add_candidate(fixture_ledger, Candidate(id="z1", task="transpose", patterns=["bank-conflicts-of-doom"]), ids)
    assert fixture_ledger.find("transpose/z1") is None
    # a bare name of an existing page is accepted, and a new version keeps an imported candidate's lost parent
    add_candidate(fixture_ledger, Candidate(id="z1", task="transpose", techniques=["shared-memory-padding"]), ids)
    g18 = fixture_ledger.get("gemm-bf16/g18")
    add_candidate(fixture_ledger, g18.model_copy(update={"status": "rejected", "reason": "cluster launch failed"}), ids)
    assert fixture_ledger.get("g18").status == "rejected"


def test_the_cli_shows_the_tier_of_a_live_ledger(corpus_index, workspace, monkeypatch):
    """`kwiki ledger search` and `kwiki search` read the workspace itself: what `kwiki ledger add` just wrote is there."""
    from typer.testing import CliRunner

    from kwiki.service.cli import app

    monkeypatch.setenv("KWIKI_INDEX_DIR", str(corpus_index))
    monkeypatch.setenv("KWIKI_LEDGER_DIR", str(workspace))
    runner = CliRunner()
    added = runner.invoke(app, ["ledger", "add", "--task", "transpose", "--id", "t40", "--parent", "t15", "--kernel", "transpose_tiled",
                                "-m", "diagonal block reordering to spread partition camping", "--status", "rejected",
                                "--reason", "no camping on H100"])
    assert added.exit_code == 0, added.stderr
    out = runner.invoke(app, ["ledger", "search", "partition camping in the transpose", "--status", "rejected"])
    assert out.exit_code == 0, out.stderr
    assert "[rejected] diagonal block reordering" in out.stdout and "why: no camping on H100" in out.stdout
    local = ["--local"] if "--local" in runner.invoke(app, ["search", "--help"]).stdout else []  # never a server on this machine's port
    plain = runner.invoke(app, ["search", "partition camping diagonal block reordering", *local])
    assert plain.exit_code == 0, plain.stderr
    assert "tried before (candidate ledger):" in plain.stdout and "transpose/t40" in plain.stdout


def test_a_search_still_answers_when_the_ledger_is_down(full):
    """An unreachable ledger database costs the experience tier (logged), never the pages of /search or a page view;
    asking for the tier alone says why."""
    from kwiki.errors import LedgerUnavailable
    from kwiki.ledger import Ledger

    down = Ledger(url="postgresql://kwiki@127.0.0.1:1/none?connect_timeout=2")
    resp = run_search(full, SearchRequest(q=BANKS, k=3), Settings(), ledger=down)
    assert resp.hits and resp.experience == []
    assert page_view(full, "technique-shared-memory-padding", down).ledger is None
    with pytest.raises(LedgerUnavailable):
        run_search(full, SearchRequest(q=BANKS, k=3, type=["experience"]), Settings(), ledger=down)
