"""Every number that shapes ranking, declared once, each with why it is what it is.

``RankingParams`` is what the search pipeline (``index/pipeline.py``) reads; nothing else in ``index/`` holds a
ranking number. How each value was measured, and what else was tried, is in ``evals/README.md`` (the tuning
history); the line beside a field says why it exists. ``kwiki eval --set NAME=VALUE`` overrides any field for a
run, so a value can be re-measured on any suite without editing code::

    >>> RankingParams().with_overrides({"bm25_weight": "0.5"}).bm25_weight
    0.5
    >>> RankingParams().with_overrides({"nope": "1"})
    Traceback (most recent call last):
    ...
    kwiki.errors.BadRequest: unknown ranking parameter 'nope'
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kwiki.errors import BadRequest

_CURATED = ("pattern", "technique", "hardware", "kernel", "language", "migration", "ncu")


class RankingParams(BaseModel):
    """The ranking's numbers. Defaults are what kwiki ships; each was set on one suite's dev split and checked on
    the other corpus (``evals/README.md``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # ---- retrieval
    candidates: int = Field(200, ge=10, description="Chunks each retriever hands to fusion: deep enough that a page "
                            "ranked 10th by pages is never cut at the chunk level")
    field_boosts: dict[str, float] = Field(
        default_factory=lambda: {"title": 3.0, "headings": 1.5, "body": 1.0, "facets": 1.5, "questions": 3.0},
        description="BM25 weight of each chunk field: a word in the title, aliases or a listed question says more "
                    "about the page than one in its prose")
    ident_boost: float = Field(3.0, ge=0, description="BM25 weight of a whole identifier (metric name, sm_90a, PTX "
                               "opcode): an exact identifier is the strongest evidence a query can give")
    expansion_weight: float = Field(0.25, ge=0, description="An alias expansion counts this share of a word typed, "
                                    "so expansions find pages without outvoting what the user said")
    typo_weight: float = Field(0.5, ge=0, description="A corrected word counts this share of a word typed: the "
                               "correction is a guess")
    long_query_words: int = Field(12, ge=2, description="From this many words a query is embedded clause by clause: "
                                  "one pooled vector of a long report is a blur")
    max_clauses: int = Field(12, ge=1, description="Clauses embedded at most: the cost stays near one encoding")
    clause_page_share: float = Field(0.7, ge=0, le=1, description="With clauses, the share of a chunk's score its "
                                     "page's best chunk gives, so a page covering every clue across sections ranks up")
    sentence_margin: float = Field(0.03, ge=0, description="Cosine a sentence gives up to stand for its chunk: a "
                                   "sentence that says what the query says lifts the chunk, a word in passing does not")
    question_margin: float = Field(0.05, ge=0, description="The same for a question the page lists")
    short_query_words: int = Field(2, ge=0, description="A query of at most this many words that names an alias is "
                                   "embedded with what the alias stands for: an acronym alone is noise to the model")
    short_query_phrases: int = Field(3, ge=0, description="Phrases of the alias group added to such a query")
    # ---- approximate vector search (a build with an approximate index only: ``settings.ANN_MIN_ROWS``)
    ann_nprobes: int = Field(40, ge=1, description="IVF partitions of the approximate index searched per query "
                             "vector, of about sqrt(rows) (``vectors.ann_partitions``): 40 of 790 found the exact top "
                             "10 at recall 0.98 on 636k noisy copies of the real vectors, 20 at 0.95 (benchmarks/scale.py)")
    # ---- fusion and roll-up
    bm25_weight: float = Field(0.45, ge=0, description="Weight of min-max normalized BM25 in the convex fusion")
    vector_weight: float = Field(0.55, ge=0, description="Weight of min-max normalized vector scores in the fusion")
    rollup_extra: float = Field(0.1, ge=0, description="A page scores its best chunk plus this share of its next "
                                "`rollup_n`: pages about the topic beat pages that mention it once")
    rollup_n: int = Field(2, ge=0, description="Further chunks counted in a page's score")
    # ---- page priors
    type_prior: dict[str, float] = Field(
        default_factory=lambda: {**dict.fromkeys(_CURATED, 1.0), "source-doc": 0.85, "source-paper": 0.85,
                                 "source-blog": 0.8, "source-contest": 0.75, "source-pr": 0.85, "experience": 0.7},
        description="Score multiplier by page type: curated pages first (KernelWiki holds ~50 PR pages per wiki page)")
    default_prior: float = Field(0.8, ge=0, description="Multiplier of a page type not in `type_prior`")
    source_intent_prior: float = Field(1.0, ge=0, description="Extra multiplier of source pages (docs, blogs, papers, "
                                       "contests) when the query asks for a source by what it is ('the blog that')")
    pr_intent_prior: float = Field(1.15, ge=0, description="Multiplier of PR pages when the query asks for a PR")
    repo_prior: float = Field(1.15, ge=0, description="Multiplier of a project's PR pages when the query names it")
    migration_prior: float = Field(1.5, ge=0, description="Multiplier of migration pages when the query is about "
                                   "porting code between generations")
    # ---- NCU routing (the metric catalog maps NCU words in the query to the pages they point to)
    signal_boost: float = Field(0.1, ge=0, description="Share of the top score added to a page an NCU signal in the "
                                "query points to")
    signal_floor: float = Field(0.5, ge=0, description="A routed page scores at least this share of the top score "
                                "(times its weight): it reaches the first page without pushing a better match down")
    signal_floor_no_ncu: float = Field(1.3, ge=0, description="The floor for pattern pages reached by symptom only "
                                       "(KernelWiki's: no metric names), on an index where no page names the metric")
    symptom_route: float = Field(0.8, ge=0, description="Weight of a pattern page reached by symptom only")
    signal_expand_weight: float = Field(0.5, ge=0, description="BM25 weight of the words the leading signal adds")
    signals_routed: int = Field(3, ge=0, description="NCU signals of a query that route pages, first named first: a "
                                "pasted profile names many, the first ones are what the user asks about")
    signal_next_weight: float = Field(0.5, ge=0, description="Weight of the second and later signals' pages relative "
                                      "to the first signal's")
    signal_main_share: float = Field(0.6, ge=0, description="Weight of a page whose first (main) `ncu_signals` entry "
                                     "is the signal, when the catalog does not name the page itself")
    signal_non_pattern: float = Field(0.6, ge=0, description="Weight of a routed ncu page relative to a pattern page: "
                                      "the pattern says what to do, the ncu page what the number means")
    # ---- links
    fix_share: float = Field(0.4, ge=0, description="A leading pattern page lifts the techniques it names as fixes "
                             "by this share of its own score (kept below it)")
    related_lift: float = Field(0.2, ge=0, description="A leading page multiplies the scores of its related pages by "
                                "1 + this (a related page the query does not touch stays out)")

    # ---- blend with page-level rankings
    blend_k: int = Field(60, ge=1, description="Reciprocal rank fusion constant of the final blend (Cormack et al.'s "
                         "60): ranks are fused, not scores, so lists on different scales need no normalization")
    blend_ranking: float = Field(1.0, ge=0, description="RRF weight of the ranking the stages above produced")
    blend_page_bm25: float = Field(0.5, ge=0, description="RRF weight of plain BM25 over whole pages: "
                                   "a question asking for a source by what it is finds it by its words")
    blend_page_vector: float = Field(0.25, ge=0, description="RRF weight of each page's best chunk cosine")
    blend_keep_routed: bool = Field(True, description="Pages NCU signals were routed to keep their place through the "
                                    "blend: the metric catalog's mapping is sharper evidence than shared words")

    # ---- relevance floor: a query no page answers says so instead of padding k weak pages
    floor_vector: float = Field(0.36, ge=-1, le=1, description="A query has no real match when its best chunk "
                                "cosine is below this and its known share below `floor_known`: the 5th percentile of "
                                "the best cosine over corpus dev questions (shipped adapter)")
    floor_known: float = Field(0.62, ge=0, le=1, description="Share of a query's idf mass carried by words the index "
                               "has seen (`PageIndex.known_share`): the 5th percentile over corpus dev questions")
    floor_nearest: int = Field(3, ge=0, description="Pages shown, marked as the nearest, when a query has no real match")

    def with_overrides(self, raw: dict[str, str]) -> "RankingParams":
        """A copy with fields set from strings (``--set NAME=VALUE``; JSON for tables: ``type_prior={"source-pr":1}``).
        Unknown names and bad values are a ``BadRequest`` that names the fields."""
        unknown = sorted(set(raw) - set(type(self).model_fields))
        if unknown:
            raise BadRequest(f"unknown ranking parameter '{unknown[0]}'",
                             hint=f"one of: {', '.join(type(self).model_fields)}")
        values = self.model_dump()
        for name, text in raw.items():
            try:
                value = json.loads(text)
            except ValueError:
                value = text
            if isinstance(values[name], dict) and isinstance(value, dict):
                value = {**values[name], **value}
            values[name] = value
        try:
            return type(self).model_validate(values)
        except ValidationError as exc:
            raise BadRequest(f"bad ranking parameter: {exc.errors()[0]['msg']}", hint="see kwiki/index/params.py") from exc


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; an item without '=' is a ``BadRequest``.

    >>> parse_overrides(["bm25_weight=0.5"])
    {'bm25_weight': '0.5'}
    """
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BadRequest(f"'{item}' is not NAME=VALUE", hint="e.g. --set bm25_weight=0.5")
        out[name.strip()] = value.strip()
    return out
