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
