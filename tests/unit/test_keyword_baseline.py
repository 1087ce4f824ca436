"""The keyword baseline scores exactly as KernelWiki's scripts/query.py describes (hand-computed cases)."""

from __future__ import annotations

from kwiki.evals.baseline import KeywordBaseline
from kwiki.ingest.models import Page, Provenance


def page(pid: str, path: str, body: str, **meta) -> Page:
    meta = {"id": pid, **meta}
    return Page(key=pid, id=pid, type="technique", title=str(meta.get("title", pid)), path=path, corpus="c",
                provenance=Provenance(corpus="c", path=path, sha256="0"), meta=meta, body=body)


PAGES = {p.key: p for p in [
    # title +10, tag field (aliases count as one) +5, body count capped at 3
    page("a", "wiki/a.md", "tma tma tma tma", title="TMA pipelines", aliases=["bulk copy"]),
    page("b", "wiki/b.md", "uses tcgen05 once", title="Blackwell GEMM", tags=["gemm"]),
    page("c", "wiki/c.md", "nothing here", title="Other", aliases=["UMMA"]),
    page("d", "wiki/d.md", "tcgen05 tcgen05", title="Also"),
    page("e", "wiki/0.md", "tcgen05", title="Tied with b"),  # ties break by path: wiki/0.md first
]}
ALIASES = {"tcgen05": ["UMMA", "tcgen05.mma"], "tma": ["bulk copy"]}


def test_title_tags_and_capped_body() -> None:
    kb = KeywordBaseline(PAGES, ALIASES)
    # 10 (title) + 0 (aliases "bulk copy" hold no "tma") + 3 (four body hits, capped)
    assert kb.search("tma") == [("a", 13.0)]
    assert kb.search("tma gemm") == [("b", 15.0), ("a", 13.0)]  # b: gemm in title (10) and tags (5)


def test_alias_field_counts_as_tag_text() -> None:
    kb = KeywordBaseline(PAGES, ALIASES)
    # "copy" is in a's aliases only: +5
    assert kb.search("copy") == [("a", 5.0)]


def test_alias_expansion_takes_the_better_variant_not_the_sum() -> None:
    kb = KeywordBaseline(PAGES, ALIASES)
    # UMMA: c has it in its aliases (+5); canonical tcgen05 scores d 2 and b 1 from the body.
    # c's best variant is "umma" (5), not umma + tcgen05.
    assert kb.search("UMMA") == [("c", 5.0), ("d", 2.0), ("e", 1.0), ("b", 1.0)]
    assert kb.search("tcgen05.mma") == kb.search("UMMA")[1:]  # another variant, same canonical


def test_ties_by_path_and_no_match_is_dropped() -> None:
    kb = KeywordBaseline(PAGES, {})
    assert kb.search("zzz") == []
    assert kb.search("UMMA") == [("c", 5.0)]  # no alias table, no expansion
    assert kb.search("tcgen05", k=2) == [("d", 2.0), ("e", 1.0)]
