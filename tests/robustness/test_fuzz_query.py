"""Property-based fuzzing of the query path (index/query.py, index/bm25.py, Searcher.search):
any user text, k and filter values give results or a 4xx KwikiError, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwiki.errors import KwikiError, PageNotFound
from kwiki.index.bm25 import BM25Query
from kwiki.index.params import RankingParams
from kwiki.index.query import AliasTable, Filters, clean_query, plan_query

FUZZ = settings(max_examples=200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# Text that reaches the analyzers: any unicode (surrogates excluded: they cannot come from HTTP),
# plus the characters that matter to tokenizers and query syntaxes.
TRICKY = st.sampled_from(['"', "'", ":", "::", ".", "_", "-", "(", ")", "[", "]", "*", "?", "~", "^", "\\", "/",
                          "AND", "OR", "NOT", "sm_90a", "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
                          "cp.async.bulk", "\x00", "\u200b", "\ufeff", "🚀", "ß", "İ", "\u0301", " ", "\n", "\t"])
TEXT = st.lists(st.one_of(st.text(st.characters(exclude_categories=["Cs"]), max_size=40), TRICKY), max_size=30).map("".join)
VALUES = st.lists(st.one_of(st.text(max_size=12), TRICKY), max_size=4)


@FUZZ
@given(text=TEXT, groups=st.dictionaries(st.text(max_size=15), st.lists(st.text(max_size=20), max_size=4), max_size=6),
       use_aliases=st.booleans())
def test_plan_query_never_raises(text, groups, use_aliases):
    table = AliasTable.from_groups(groups)
    plan = plan_query(text, table, Filters(tag=["x"], architecture=["sm90"]), RankingParams(), use_aliases=use_aliases)
    assert len(plan.bm25.terms) <= 96 and len(plan.bm25.idents) <= 48
    assert all(isinstance(t, str) and t for t, _ in plan.bm25.terms + plan.bm25.idents)


@FUZZ
@given(text=st.one_of(st.none(), TEXT, st.text(min_size=190, max_size=260)))
def test_clean_query_cleans_or_says_why(text):
    try:
        out = clean_query(text, max_chars=200)
    except KwikiError as exc:
        assert exc.status == 400 and exc.message
    else:
        assert out and out == out.strip() and len(out) <= 200 and "\x00" not in out


@pytest.fixture(scope="module")
def mini_searcher(mini_index, embedder):
    from kwiki.index.search import Searcher

    return Searcher.open(mini_index, embedder=embedder)


@pytest.mark.slow
@FUZZ
@given(terms=st.lists(st.tuples(TEXT, st.sampled_from([1.0, 0.5, 0.25])), max_size=8),
       idents=st.lists(st.tuples(TEXT, st.just(1.0)), max_size=4),
       filters=st.lists(st.lists(TEXT, min_size=1, max_size=3), max_size=3))
def test_bm25_accepts_any_terms(mini_searcher, terms, idents, filters):
    hits = mini_searcher.bm25.search(BM25Query(terms=terms, idents=idents, must_filters=filters), 20, RankingParams())
    n = len(mini_searcher.chunk_ids)
    assert all(0 <= row < n for row, _ in hits)


@pytest.mark.slow
@FUZZ
@given(q=st.one_of(TEXT, st.none()), k=st.one_of(st.integers(-5, 120), st.just(10)),
       filters=st.fixed_dictionaries({}, optional={
           name: st.one_of(VALUES, st.sampled_from([["pattern"], ["mini"], ["inferred"], ["sm90"], ["B200"], ["tail-effect"]]))
           for name in ("type", "tag", "architecture", "language", "confidence", "corpus")}))
def test_search_answers_or_says_why(mini_searcher, q, k, filters):
    try:
        resp = mini_searcher.search(q, k=k, filters=filters, max_chars=300, max_k=100)
    except KwikiError as exc:
        assert 400 <= exc.status < 500 and exc.message, exc
    else:
        assert len(resp.hits) <= k
        assert all(h.id in mini_searcher.pages for h in resp.hits)


@pytest.mark.slow
@FUZZ
@given(key=st.one_of(TEXT, st.sampled_from(["pattern-mini-tail", "../manifest.json", "/etc/passwd", "mini:x"])))
def test_page_lookup_is_only_into_the_index(mini_searcher, key):
    try:
        page = mini_searcher.page(key)
    except PageNotFound:
        assert key not in mini_searcher.pages
    else:
        assert page.id == key and key in mini_searcher.pages
