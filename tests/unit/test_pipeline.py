"""Each ranking stage of ``index/pipeline.py`` alone, on hand-computed cases (no index, no model)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kwiki.index import pipeline
from kwiki.index.params import RankingParams
from kwiki.index.pipeline import Candidates, Plan, SearchOptions
from kwiki.index.query import AliasTable, Filters, plan_query
from kwiki.ingest.models import Page, Provenance

P = RankingParams()


def page(key: str, type_: str = "pattern", **kw) -> Page:
    return Page(key=key, id=key, type=type_, title=key, path=f"wiki/{key}.md", corpus="c",
                provenance=Provenance(corpus="c", path=f"wiki/{key}.md", sha256="0"), **kw)


def fake_index(pages: list[Page], chunk_page: list[str], routed: dict | None = None) -> SimpleNamespace:
    by_key = {p.key: p for p in pages}
    return SimpleNamespace(
        pages=by_key, chunk_page=chunk_page, page_pos={k: i for i, k in enumerate(by_key)}, page_repo={}, repo_names=set(),
        rank_order=lambda item: (-item[1], by_key[item[0]].path), find_page=lambda key, corpus=None: by_key.get(key),
        signal_pages=lambda signals, f, params: routed or {},
    )


def plan(text: str = "q", signals: list | None = None, **options) -> Plan:
    return Plan(text=text, k=10, query=plan_query(text, AliasTable(), Filters(), P), options=SearchOptions(**options),
                signals=signals or [])


def test_fuse_is_the_convex_combination_of_min_max_normalized_lists():
    c = Candidates(bm25=[(0, 8.0), (1, 4.0), (2, 2.0)], vector=[(2, 0.9), (0, 0.5)])
    pipeline.fuse(plan(), c, P, fake_index([], []))
    # bm25 8, 4, 2 -> 1, 1/3, 0; cosines 0.9, 0.5 -> 1, 0
    assert c.fused[0] == pytest.approx(P.bm25_weight * 1.0)
    assert c.fused[1] == pytest.approx(P.bm25_weight / 3)
    assert c.fused[2] == pytest.approx(P.vector_weight * 1.0)
    swapped = Candidates(bm25=c.bm25, vector=c.vector)
    pipeline.fuse(plan(), swapped, P.with_overrides({"bm25_weight": "1", "vector_weight": "0"}), fake_index([], []))
    assert max(swapped.fused, key=swapped.fused.get) == 0


def test_roll_up_takes_the_best_chunk_plus_a_share_of_the_next_and_keeps_the_best_chunk():
    idx = fake_index([page("a"), page("b")], ["a", "a", "a", "a", "b"])
    c = Candidates(fused={0: 0.2, 1: 1.0, 2: 0.4, 3: 0.1, 4: 1.1})
    pipeline.roll_up(plan(), c, P, idx)
    assert c.pages["a"] == pytest.approx(1.0 + P.rollup_extra * (0.4 + 0.2))
    assert c.pages["b"] == pytest.approx(1.1)
    assert c.best_chunk == {"a": 1, "b": 4}


def test_priors_multiply_by_type_and_by_intent():
    idx = fake_index([page("p"), page("pr", "source-pr"), page("blog", "source-blog"), page("m", "migration")], [])
    c = Candidates(pages={"p": 1.0, "pr": 1.0, "blog": 1.0, "m": 1.0})
    pipeline.apply_priors(plan("tail effect"), c, P, idx)
    assert c.pages == {"p": 1.0, "pr": P.type_prior["source-pr"], "blog": P.type_prior["source-blog"], "m": 1.0}
    c = Candidates(pages={"p": 1.0, "pr": 1.0, "blog": 1.0, "m": 1.0})
    pipeline.apply_priors(plan("which PR ported this"), c, P, idx)
    assert c.priors["pr"] == P.pr_intent_prior and c.priors["m"] == P.migration_prior
    strong = P.with_overrides({"source_intent_prior": "2"})
    c = Candidates(pages={"p": 1.0, "blog": 1.0})
    pipeline.apply_priors(plan("the blog about tail effect"), c, strong, idx)
    assert c.pages["blog"] == pytest.approx(2 * P.type_prior["source-blog"])
    c = Candidates(pages={"p": 0.3})
    pipeline.apply_priors(plan("x", type_prior=False), c, P, idx)
    assert c.pages == {"p": 0.3} and c.priors == {"p": 1.0}


def test_routing_boosts_and_floors_routed_pages_relative_to_the_top():
    with_metric = page("stall", ncu_signals=[{"signal": "long-scoreboard"}])
    idx = fake_index([page("top", "technique"), with_metric], [], routed={"stall": (1.0, "long-scoreboard")})
    c = Candidates(pages={"top": 2.0, "stall": 0.1})
    pipeline.route_signals(plan(signals=[{"signal": "long-scoreboard"}]), c, P, idx)
    assert c.pages["stall"] == pytest.approx(max(0.1 + P.signal_boost * 2.0, P.signal_floor * 2.0))
    # a pattern page reached by symptom only, on an index where no routed page names the metric: the higher floor
    idx = fake_index([page("top", "technique"), page("sym")], [], routed={"sym": (0.5, "tail-effect")})
    c = Candidates(pages={"top": 2.0})
    pipeline.route_signals(plan(signals=[{"signal": "tail-effect"}]), c, P, idx)
    assert c.pages["sym"] == pytest.approx(P.signal_floor_no_ncu * 2.0 * 0.5)
    untouched = Candidates(pages={"top": 2.0})
    pipeline.route_signals(plan(), untouched, P, idx)  # no signal in the query
    assert untouched.pages == {"top": 2.0}


def test_links_lift_a_leading_patterns_fixes_below_it_and_not_when_a_signal_was_routed():
    lead = page("lead", candidate_techniques=["fix"], related=["rel"])
    idx = fake_index([lead, page("fix", "technique"), page("rel", "hardware"), page("other")], [])
    c = Candidates(pages={"lead": 1.0, "fix": 0.2, "rel": 0.5, "other": 0.6})
    pipeline.lift_links(plan(), c, P, idx)
    assert c.pages["fix"] == pytest.approx(0.2 + P.fix_share * 1.0)
    assert c.pages["rel"] == pytest.approx(0.5 * (1 + P.related_lift))
    assert c.lifted == {"fix": ("fix", "lead"), "rel": ("related", "lead")}
    capped = Candidates(pages={"lead": 1.0, "fix": 0.9})
    pipeline.lift_links(plan(), capped, P, idx)
    assert capped.pages["fix"] < capped.pages["lead"]  # never above the page that links it
    routed = Candidates(pages={"lead": 1.0, "fix": 0.2})
    pipeline.lift_links(plan(signals=[{"signal": "x"}]), routed, P, idx)
    assert routed.pages["fix"] == 0.2 and not routed.lifted


def test_plan_vector_is_the_normalized_mean_of_the_clause_vectors():
    p = plan()
    assert p.vector is None
    p.vectors = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    assert p.vector.tolist() == pytest.approx([2 ** -0.5, 2 ** -0.5])


def test_params_refuse_unknown_names_and_bad_values():
    from kwiki.errors import BadRequest
    from kwiki.index.params import parse_overrides

    assert P.with_overrides({"type_prior": '{"source-pr": 1.0}'}).type_prior["source-pr"] == 1.0
    assert P.with_overrides({"type_prior": '{"source-pr": 1.0}'}).type_prior["pattern"] == 1.0  # tables merge
    with pytest.raises(BadRequest, match="unknown ranking parameter"):
        P.with_overrides({"bm25_wieght": "1"})
    with pytest.raises(BadRequest, match="bad ranking parameter"):
        P.with_overrides({"candidates": "-3"})
    with pytest.raises(BadRequest):
        parse_overrides(["bm25_weight"])


def test_floor_says_no_match_only_when_the_vector_and_the_words_both_fail():
    known = {"share": 0.2}
    idx = SimpleNamespace(page_bm25=SimpleNamespace(known_share=lambda terms: known["share"]))
    low = Candidates(vector=[(0, P.floor_vector - 0.01)])
    pipeline.floor(plan("kubernetes ingress"), low, P, idx)
    assert low.no_match and f"{P.floor_nearest} nearest" in low.no_match
    close = Candidates(vector=[(0, P.floor_vector + 0.01)])  # a paraphrase lands near its chunk
    pipeline.floor(plan("kubernetes ingress"), close, P, idx)
    assert close.no_match is None
    known["share"] = P.floor_known + 0.01  # words the pages use, read poorly by the model
    words = Candidates(vector=[(0, P.floor_vector - 0.01)])
    pipeline.floor(plan("kubernetes ingress"), words, P, idx)
    assert words.no_match is None
    known["share"] = 0.0
    for c, p in ((Candidates(vector=[(0, 0.0)]), plan("x", signals=[{"signal": "long-scoreboard"}])),
                 (Candidates(vector=[(0, 0.0)]), plan("x", floor=False))):
        pipeline.floor(p, c, P, idx)  # an NCU signal is in the domain; the switch turns it off
        assert c.no_match is None
