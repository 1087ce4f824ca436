"""Rank fusion and roll-up from chunk hits to pages.

    >>> rrf([["a", "b"], ["b", "c"]], k=60)["b"] > rrf([["a", "b"], ["b", "c"]], k=60)["a"]
    True
"""

from __future__ import annotations

from collections import defaultdict
from typing import Hashable, Iterable, Sequence

RRF_K = 60


def rrf(rankings: Sequence[Sequence[Hashable]], k: int = RRF_K, weights: Sequence[float] | None = None) -> dict:
    """Reciprocal rank fusion: ``score(d) = sum_i w_i / (k + rank_i(d))`` with 1-based ranks."""
    weights = weights or [1.0] * len(rankings)
    scores: dict = defaultdict(float)
    for ranking, w in zip(rankings, weights):
        for rank, item in enumerate(ranking, 1):
            scores[item] += w / (k + rank)
    return dict(scores)


def convex(scored: Sequence[Sequence[tuple[Hashable, float]]], weights: Sequence[float]) -> dict:
    """Weighted sum of min-max normalized scores: ``score(d) = sum_i w_i * (s_i(d) - min_i) / (max_i - min_i)``.

    Unlike RRF it keeps how far ahead a hit is: a chunk whose cosine stands out scores high even when BM25
    missed it, where RRF would rank it below chunks both lists found at middling ranks. A list that misses
    a document contributes 0; a list whose scores are all equal counts 1 for each of its documents.

    >>> convex([[("a", 10.0), ("b", 5.0)], [("b", 0.9), ("c", 0.5)]], [0.5, 0.5])
    {'a': 0.5, 'b': 0.5, 'c': 0.0}
    """
    out: dict = defaultdict(float)
    for hits, w in zip(scored, weights):
        if not hits:
            continue
        values = [x for _, x in hits]
        lo, span = min(values), max(values) - min(values)
        for item, x in hits:
            out[item] += w * ((x - lo) / span if span > 0 else 1.0)
    return dict(out)


def rollup(chunk_scores: Iterable[tuple[Hashable, Hashable, float]], extra_weight: float = 0.25, extra_n: int = 2) -> dict:
    """Page score from its chunks: the best chunk plus ``extra_weight`` times the next ``extra_n``.

    Rewarding a second and third matching section favours pages *about* the topic over pages
    that mention it once, without letting long pages win by sheer length.
    """
    by_page: dict = defaultdict(list)
    for page, _chunk, score in chunk_scores:
        by_page[page].append(score)
    out = {}
    for page, scores in by_page.items():
        scores.sort(reverse=True)
        out[page] = scores[0] + extra_weight * sum(scores[1 : 1 + extra_n])
    return out
