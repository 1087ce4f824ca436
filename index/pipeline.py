"""Search as a declared pipeline: plan -> retrieve (BM25, vectors) -> fuse -> page scores -> ranking stages -> blend
-> floor.

``Searcher.search`` makes a :class:`Plan`, runs :data:`STAGES` in order over one :class:`Candidates`, and presents
the top pages. Each stage is a function ``stage(plan, candidates, params, index)`` that reads the plan and the
numbers of :class:`~kwiki.index.params.RankingParams` and fills or rescales the candidates; ``index`` is the
:class:`~kwiki.index.search.Searcher` whose pages and retrievers it uses. Stages are unit-tested one by one
(``tests/unit/test_pipeline.py``) and switched off by :class:`SearchOptions` for ablations.

    >>> [s.__name__ for s in STAGES]
    ['retrieve_bm25', 'retrieve_vectors', 'fuse', 'roll_up', 'apply_priors', 'route_signals', 'lift_links', 'blend_pages', 'floor']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from . import ranking
from .fusion import convex, rollup, rrf
from .params import RankingParams
from .query import QueryPlan, norm_phrase

if TYPE_CHECKING:
    from .search import Searcher


@dataclass(frozen=True)
class SearchOptions:
    """Feature switches; evals turn them off one at a time to show what each is worth."""

    bm25: bool = True
    vector: bool = True
    aliases: bool = True
    type_prior: bool = True
    ncu_routing: bool = True
    sentences: bool = True  # sentence vectors of the curated pages
    links: bool = True  # the leading page lifts the pages it links: a pattern's fixes, any page's related pages
    typos: bool = True  # a query word the index never saw also searches the indexed word one edit away
    clauses: bool = True  # a long query is embedded clause by clause
    questions: bool = True  # match the questions pages list (``questions:``), by BM25 and by vector
    page_lists: bool = True  # blend in whole-page BM25 and best-chunk cosine rankings (``blend_pages``)
    floor: bool = True  # a query no page really matches says so and shows only the nearest pages (``floor``)


@dataclass
class Plan:
    """What the query asks, worked out once before any retrieval."""

    text: str
    k: int
    query: QueryPlan  # tokens, alias groups, corrections, filters
    options: SearchOptions
    signals: list[dict[str, Any]] = field(default_factory=list)  # NCU vocabulary recognized in the text
    clauses: list[str] = field(default_factory=list)  # a long query's clauses, each embedded on its own
    vectors: np.ndarray | None = None  # the query vector(s): one, or one per clause
    mask: tuple[np.ndarray, np.ndarray] | None = None  # (page mask, chunk mask) of the filters; None: no filter

    @property
    def vector(self) -> np.ndarray | None:
        """One normalized vector standing for the whole query (the clauses' mean)."""
        if self.vectors is None or not len(self.vectors):
            return None
        mean = self.vectors.mean(axis=0)
        return mean / max(float(np.linalg.norm(mean)), 1e-12)


@dataclass
class Candidates:
    """What the stages hand each other."""

    bm25: list[tuple[int, float]] = field(default_factory=list)  # (chunk row, score), best first
    vector: list[tuple[int, float]] = field(default_factory=list)
    fused: dict[int, float] = field(default_factory=dict)  # chunk row -> fused score
    pages: dict[str, float] = field(default_factory=dict)  # page key -> score
    best_chunk: dict[str, int] = field(default_factory=dict)  # page key -> its best fused chunk row
    priors: dict[str, float] = field(default_factory=dict)  # page key -> multiplier applied (why.type_prior)
    routed: dict[str, tuple[float, str]] = field(default_factory=dict)  # page key -> (weight, signal)
    lifted: dict[str, tuple[str, str]] = field(default_factory=dict)  # page key -> ("fix" | "related", lead key)
    no_match: str | None = None  # why no page really matches the query (``floor``), None when some does

    def rank(self, row: int, which: str) -> int | None:
        hits = self.bm25 if which == "bm25" else self.vector
        for i, (r, _) in enumerate(hits, 1):
            if r == row:
                return i
        return None


def model_text(text: str, query: QueryPlan, params: RankingParams) -> str:
    """What the model embeds for a query of a few words that names an alias ("UMMA", "TMEM"): the words and
    their alias group's first phrases (the plan's groups: none when aliases are off). An acronym alone is noise
    to MiniLM and lands near any short sentence.

    >>> from kwiki.index.query import AliasTable, Filters, plan_query
    >>> table = AliasTable.from_groups({"tmem": ["tensor memory"]})
    >>> model_text("TMEM", plan_query("TMEM", table, Filters(), RankingParams()), RankingParams())
    'TMEM (tensor memory)'
    """
    if len(text.split()) > params.short_query_words:
        return text
    named = [p for g in query.groups[:2] for p in g.phrases()[: params.short_query_phrases]
             if norm_phrase(p) != norm_phrase(text)]
    return f"{text} ({', '.join(dict.fromkeys(named))})" if named else text


# ------------------------------------------------------------------------------------------------ retrieval
def retrieve_bm25(plan: Plan, c: Candidates, params: RankingParams, index: "Searcher") -> None:
    """Chunks by BM25 over the plan's tokens, alias expansions, corrections and routed-signal words."""
    if plan.options.bm25:
        c.bm25 = index.bm25.search(plan.query.bm25, params.candidates, params)


def retrieve_vectors(plan: Plan, c: Candidates, params: RankingParams, index: "Searcher") -> None:
    """Chunks by cosine with the query vector(s), a chunk standing also for its sentences and listed questions."""
    if plan.options.vector and plan.vectors is not None:
        c.vector = index.vindex.search(plan.vectors, params.candidates, plan.mask[1] if plan.mask else None, params,
                                       sentences=plan.options.sentences, pages=index.page_index,
                                       questions=plan.options.questions)


# ------------------------------------------------------------------------------------------------ fusion
def fuse(plan: Plan, c: Candidates, params: RankingParams, index: "Searcher") -> None:
    """Convex combination of the min-max normalized lists (``fusion.convex``)."""
    c.fused = convex([c.bm25, c.vector], (params.bm25_weight, params.vector_weight))


def roll_up(plan: Plan, c: Candidates, params: RankingParams, index: "Searcher") -> None:
    """Page scores from chunk scores (``fusion.rollup``), and each page's best chunk for its snippet."""
    c.pages = rollup(((index.chunk_page[r], r, s) for r, s in c.fused.items()), extra_weight=params.rollup_extra,
                     extra_n=params.rollup_n)
    for row, _ in sorted(c.fused.items(), key=lambda x: -x[1]):
        c.best_chunk.setdefault(index.chunk_page[row], row)


# ------------------------------------------------------------------------------------------------ ranking stages
def apply_priors(plan: Plan, c: Candidates, params: RankingParams, index: "Searcher") -> None:
    """Multiply each page by its type prior, or by an intent prior when the query asks for that kind of page."""
    if plan.options.type_prior:
        c.priors = ranking.page_priors(index.pages, c.pages, plan.text, index.page_repo, index.repo_names, params)
    else:
        c.priors = dict.fromkeys(c.pages, 1.0)
    for key, prior in c.priors.items():
        c.pages[key] *= prior


def route_signals(plan: Plan, c: Candidates, params: RankingParams, index: "Searcher") -> None:
    """Pages the NCU signals of the query point to get a boost and a floor relative to the top score."""
    if not plan.signals:
        return
    c.routed = index.signal_pages(plan.signals, plan.query.filters, params)
    if not c.routed:
        return
    top = max(c.pages.values(), default=1.0)
    # Pages routed by their own metric names (kwiki's) are the sharper evidence: when any was routed, pages
    # reached by symptom only (KernelWiki's) get the same floor instead of the higher one.
    by_metric = any(index.pages[key].ncu_signals for key in c.routed)
    for key, (weight, _sig) in c.routed.items():
        boosted = c.pages.get(key, 0.0) + params.signal_boost * top * weight
        floor = params.signal_floor if index.pages[key].ncu_signals or by_metric else params.signal_floor_no_ncu
        c.pages[key] = max(boosted, floor * top * weight)
        c.priors.setdefault(key, 1.0)


def lift_links(plan: Plan, c: Candidates, params: RankingParams, index: "Searcher") -> None:
    """The leading page lifts the pages it links (a pattern's fixes, any page's related pages), below itself.
    Not when an NCU signal was routed: routing lifts its own pages."""
    if not plan.options.links or plan.signals:
        return
    mask = plan.mask
    c.lifted = ranking.lift_links(c.pages, index.pages, index.find_page, index.rank_order,
                                  lambda key: mask is None or bool(mask[0][index.page_pos[key]]), params)
    for key in c.lifted:
        c.priors.setdefault(key, 1.0)


# ------------------------------------------------------------------------------------------------ blend
def blend_pages(plan: Plan, c: Candidates, params: RankingParams, index: "Searcher") -> None:
    """Reciprocal rank fusion of the ranking so far with two page-level rankings that need nothing but the
    pages: plain BM25 over whole pages (title, tag fields, body) and each page's best chunk cosine. The stages
    above read fields a curated corpus has (listed questions, ``ncu_signals``, links, types); a page-level
    view keeps a user's own checkout, and questions that ask for a source by what it is, from resting on them."""
    if not plan.options.page_lists or not c.pages:
        return
    before = [key for key, _ in sorted(c.pages.items(), key=index.rank_order)]
    lists = [before]
    weights = [params.blend_ranking]
    if plan.options.bm25 and params.blend_page_bm25 > 0:
        rows = index.page_bm25.search(plan.query.prose, plan.query.bm25.must_filters, params.candidates)
        lists.append([index.page_keys[r] for r, _ in rows])
        weights.append(params.blend_page_bm25)
    if plan.vector is not None and params.blend_page_vector > 0:
        rows = index.vindex.page_max(plan.vector, index.page_index, len(index.page_keys),
                                     plan.mask[1] if plan.mask else None, params.candidates, params)
        lists.append([index.page_keys[r] for r, _ in rows])
        weights.append(params.blend_page_vector)
    if len(lists) == 1:
        return
    fused = rrf(lists, k=params.blend_k, weights=weights)
    if c.routed and params.blend_keep_routed:
        # pages an NCU signal was routed to keep the place routing gave them (the catalog's mapping is sharper
        # evidence than shared words); the other pages are blended around them
        pinned = {i: key for i, key in enumerate(before) if key in c.routed}
        rest = [key for key, _ in sorted(fused.items(), key=lambda x: (-x[1], index.pages[x[0]].path))
                if key not in c.routed]
        order = [pinned[i] if i in pinned else rest.pop(0) for i in range(len(pinned) + len(rest))]
        fused = {key: 1.0 / (1 + i) for i, key in enumerate(order)}
    c.pages = fused
    for key in c.pages:
        c.priors.setdefault(key, 1.0)


# ------------------------------------------------------------------------------------------------ floor
def floor(plan: Plan, c: Candidates, params: RankingParams, index: "Searcher") -> None:
    """Decide whether any page really matches: not when the closest chunk is far from the query *and* most of
    the query's idf mass is in words no page contains (two views that fail together only off topic: a metric
    name the model reads poorly is a known word, a paraphrase with new words still lands near its chunk)."""
    if not plan.options.floor or not plan.options.vector or plan.signals:
        return
    best = c.vector[0][1] if c.vector else -1.0
    known = index.page_bm25.known_share(plan.query.prose)
    if best < params.floor_vector and known < params.floor_known:
        c.no_match = (f"no page matches this query well: its closest section has cosine {best:.2f} "
                      f"(floor {params.floor_vector}) and {known:.0%} of its words' weight is in words no page uses "
                      f"(floor {params.floor_known:.0%}); the {params.floor_nearest} nearest pages are shown")


Stage = Callable[[Plan, Candidates, RankingParams, "Searcher"], None]
STAGES: tuple[Stage, ...] = (retrieve_bm25, retrieve_vectors, fuse, roll_up, apply_priors, route_signals, lift_links,
                             blend_pages, floor)
