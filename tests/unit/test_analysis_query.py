import pytest

from kwiki.errors import BadRequest, QueryTooLong
from kwiki.index.analysis import ident_tokens, prose_tokens
from kwiki.index.bm25 import query_tokens
from kwiki.index.params import RankingParams
from kwiki.index.query import AliasTable, Filters, clauses, clean_query, plan_query

P = RankingParams()
LONG_QUERY_WORDS, MAX_CLAUSES = P.long_query_words, P.max_clauses


@pytest.mark.parametrize(
    "ident", ["smsp__pcsamp_warps_issue_stalled_long_scoreboard", "sm_90a", "cp.async.bulk", "__syncthreads", "cta_group::2"]
)
def test_identifiers_stay_whole(ident):
    assert ident.lower() in ident_tokens(f"look at {ident} here")


def test_prose_is_stemmed_and_lowercased():
    assert prose_tokens("Coalesced Loads") == ["coalesc", "load"]


def test_query_tokens_drop_stopwords_but_keep_identifiers():
    prose, idents = query_tokens("why is my sm_90a kernel slow")
    assert "my" not in prose and "kernel" in prose
    assert idents == ["sm_90a"]


@pytest.mark.parametrize("q", ['"unbalanced', "sm_80:", "-foo", "http://x.y", "a AND", "(x", "*", "\\", "~~", "!!!"])
def test_hostile_text_builds_a_query_without_the_parser(q):
    plan = plan_query(clean_query(q, 2000), AliasTable(), Filters(), RankingParams())
    assert plan.bm25.terms or plan.bm25.idents or q.strip("*\\~!") == ""


def test_empty_and_overlong_queries_are_rejected():
    with pytest.raises(BadRequest):
        clean_query("   ", 2000)
    with pytest.raises(QueryTooLong):
        clean_query("x" * 10_000, 2000)


def test_aliases_expand_both_ways_with_phrases():
    table = AliasTable.from_groups({"tmem": ["tensor memory", "TMEM"], "sm100": ["B200"]})
    assert [g.canonical for g in table.match("how big is tensor memory")] == ["tmem"]
    assert [g.canonical for g in table.match("tmem size")] == ["tmem"]
    plan = plan_query("B200 limits", table, Filters(), RankingParams())
    assert ("sm100", 0.25) in plan.bm25.terms or "sm100" in [t for t, _ in plan.bm25.idents]
    assert table.canonical_of("B200", {"sm100", "sm90"}) == "sm100"


def test_a_long_query_splits_into_its_clues():
    q = ("bf16 GEMM at K=256 gets a fraction of the throughput it gets at K=8192, and most samples sit after "
         "the K loop; the tensor pipe is idle during the stores")
    assert clauses(q, P) == ["bf16 GEMM at K=256 gets a fraction of the throughput it gets at K=8192",
                          "most samples sit after the K loop", "the tensor pipe is idle during the stores"]


def test_short_queries_and_single_clauses_are_not_split():
    assert clauses("only 8 of 132 SMs busy at the end", P) == []
    assert len("a b c d e f g h i j k l".split()) == LONG_QUERY_WORDS
    assert clauses("my kernel spends most of its time waiting on global loads from a very large table", P) == []
    assert clauses("a b c d, e f g h, i j k l", P) == ["a b c d", "e f g h", "i j k l"]
    assert clauses("one two three four five six seven, x, and eight nine ten", P) == [
        "one two three four five six seven", "eight nine ten"]  # a one-word fragment is no clue


def test_a_pasted_report_keeps_only_the_first_clauses():
    report = ", ".join(f"metric number {i} is at {i}% of peak" for i in range(40))
    parts = clauses(report, P)
    assert len(parts) == MAX_CLAUSES and parts[0] == "metric number 0 is at 0% of peak"
