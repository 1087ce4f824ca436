"""Run labeled questions through kwiki's methods and score them with ir-measures.

    >>> from kwiki.evals.runner import evaluate
    >>> result = evaluate(searcher, load_suite("corpus"), ["bm25", "hybrid"])     # doctest: +SKIP
    >>> result["overall"]["hybrid"]["all"]["nDCG@10"]                              # doctest: +SKIP
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Callable

import ir_measures
import numpy as np

from kwiki.index.params import RankingParams
from kwiki.index.search import SearchOptions, Searcher

from .baseline import KeywordBaseline, NaiveFusion
from .questions import Question, qrels

MEASURES = {"nDCG@10": "nDCG@10", "MRR@10": "RR@10", "Recall@5": "R@5", "Recall@10": "R@10", "Hit@1": "Success@1"}
DEPTH = 20

#: Method name -> search options (None: a baseline of ``evals/baseline.py`` by that name). "hybrid" is what kwiki
#: ships; "naive-fusion" is the two-line BM25 + MiniLM fusion every report shows beside it.
METHODS: dict[str, SearchOptions | None] = {
    "keyword-baseline": None,
    "naive-fusion": None,
    # Plain baselines: no expansion of the query (aliases) nor of the pages (their listed questions).
    "bm25": SearchOptions(vector=False, aliases=False, type_prior=False, ncu_routing=False, links=False, typos=False,
                          clauses=False, questions=False),
    "vector": SearchOptions(bm25=False, aliases=False, type_prior=False, ncu_routing=False, links=False, typos=False,
                            clauses=False, questions=False),
    # BM25 over the pages with their questions: what the page-side expansion does without the rest of kwiki
    "bm25-with-questions": SearchOptions(vector=False, aliases=False, type_prior=False, ncu_routing=False, links=False,
                                         typos=False, clauses=False),
    "hybrid": SearchOptions(),
    "hybrid-no-vector": SearchOptions(vector=False),
    "hybrid-no-bm25": SearchOptions(bm25=False),
    "hybrid-no-aliases": SearchOptions(aliases=False),
    "hybrid-no-type-prior": SearchOptions(type_prior=False),
    "hybrid-no-ncu-routing": SearchOptions(ncu_routing=False),
    "hybrid-no-sentences": SearchOptions(sentences=False),
    "hybrid-no-links": SearchOptions(links=False),
    "hybrid-no-typos": SearchOptions(typos=False),
    "hybrid-no-clauses": SearchOptions(clauses=False),
    "hybrid-no-questions": SearchOptions(questions=False),
    "hybrid-no-page-lists": SearchOptions(page_lists=False),
}
SHIPPED = "hybrid"


def run_method(searcher: Searcher, questions: list[Question], method: str, corpus: str | None = None,
               progress: Callable[[], None] | None = None, params: RankingParams | None = None,
               base_searcher: Searcher | None = None, no_match: set[str] | None = None) -> dict[str, dict[str, float]]:
    """qid -> {page id: score} for one method (page ids, not corpus-qualified keys); ``params`` replace the
    searcher's ranking numbers (``kwiki eval --set``); ``base_searcher`` is the same corpus indexed with the base
    model, for the naive fusion (None: ``searcher``); ``no_match`` collects the ids of questions the relevance
    floor said no page answers."""
    options = METHODS[method]
    run: dict[str, dict[str, float]] = {}
    baseline: KeywordBaseline | NaiveFusion | None = None
    if method == "naive-fusion":
        base = base_searcher or searcher  # the published model, whatever adapter the shipped index uses
        pages = {k: p for k, p in base.pages.items() if corpus is None or p.corpus == corpus}
        baseline = NaiveFusion(pages, base.vindex.matrix, base.chunk_page, base._embedder().encode)
    elif options is None:
        # The corpus' data/aliases.yaml as ingested, in file order: KernelWiki's tool knows no page aliases.
        aliases: dict[str, list[str]] = {}
        for name, table in searcher.corpus_aliases.items():
            if corpus is None or name == corpus:
                for canonical, variants in table.items():
                    aliases.setdefault(canonical, []).extend(variants)
        pages = {k: p for k, p in searcher.pages.items() if corpus is None or p.corpus == corpus}
        baseline = KeywordBaseline(pages, aliases)
    filters = {"corpus": [corpus]} if corpus else {}
    for q in questions:
        if baseline is not None:
            hits = [(pages[key].id, score) for key, score in baseline.search(q.query, DEPTH)]
        else:
            resp = searcher.search(q.query, k=DEPTH, filters=filters, options=options, max_chars=10_000, params=params)
            hits = [(h.page_id, h.score) for h in resp.hits]
            if resp.no_match and no_match is not None:
                no_match.add(q.id)
        # ir-measures sorts by score; strictly decreasing scores keep our order (ties included)
        run[q.id] = {pid: float(DEPTH - i) for i, (pid, _) in enumerate(dict(hits).items())}
        if progress:
            progress()
    return run


def score(questions: list[Question], run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per question: measure name -> value."""
    measures = [ir_measures.parse_measure(m) for m in MEASURES.values()]
    names = {str(ir_measures.parse_measure(v)): k for k, v in MEASURES.items()}
    per_q: dict[str, dict[str, float]] = defaultdict(dict)
    qrel = [ir_measures.Qrel(qid, doc, rel) for qid, doc, rel in qrels(questions)]
    scored = [ir_measures.ScoredDoc(qid, doc, s) for qid, docs in run.items() for doc, s in docs.items()]
    for m in ir_measures.iter_calc(measures, qrel, scored):
        per_q[m.query_id][names[str(m.measure)]] = float(m.value)
    for q in questions:  # a question with no results scores 0, not "missing"
        for name in MEASURES:
            per_q[q.id].setdefault(name, 0.0)
    return dict(per_q)


def aggregate(questions: list[Question], per_q: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Group -> measure -> mean, for groups 'all', 'dev', 'test' and every category."""
    groups: dict[str, list[str]] = defaultdict(list)
    for q in questions:
        for g in ("all", q.split, f"category:{q.category}"):
            groups[g].append(q.id)
    return {g: {m: round(statistics.fmean(per_q[i][m] for i in ids), 4) for m in MEASURES} | {"n": len(ids)}
            for g, ids in sorted(groups.items())}


def evaluate(searcher: Searcher, questions: list[Question], methods: list[str], corpus: str | None = None,
             progress: Callable[[], None] | None = None, params: RankingParams | None = None,
             base_searcher: Searcher | None = None) -> dict[str, Any]:
    """Scores of every method, overall and per category, plus per-question detail for the shipped one."""
    out: dict[str, Any] = {"overall": {}, "per_question": {}, "runs": {}}
    for method in methods:
        flagged: set[str] = set()
        run = run_method(searcher, questions, method, corpus, progress, params, base_searcher, flagged)
        if method == SHIPPED:
            out["no_match"] = sorted(flagged)
        per_q = score(questions, run)
        out["overall"][method] = aggregate(questions, per_q)
        out["per_question"][method] = per_q
        out["runs"][method] = {qid: list(docs)[:10] for qid, docs in run.items()}
    return out


def floor_rates(searcher: Searcher, questions: list[Question], no_match: list[str], unanswerable: list[str],
                params: RankingParams | None = None) -> dict[str, Any]:
    """How the relevance floor did: the share of ``unanswerable`` queries (``questions/no-answer.yaml``) it said no
    page answers, and the share of labeled questions per split it said that of (each a wrongly hidden answer)."""
    said = [searcher.search(text, k=DEPTH, params=params).no_match for text in unanswerable]
    by_split: dict[str, list[bool]] = defaultdict(list)
    for q in questions:
        by_split[q.split].append(q.id in no_match)
    return {"unanswerable": round(statistics.fmean(said), 4) if said else None, "n_unanswerable": len(said),
            "answerable": {split: round(statistics.fmean(v), 4) for split, v in sorted(by_split.items())},
            "answerable_ids": no_match}


def top3_rate(questions: list[Question], run_top: dict[str, list[str]], categories: tuple[str, ...]) -> float:
    """Share of questions in ``categories`` with a relevant page in the top 3."""
    qs = [q for q in questions if q.category in categories]
    if not qs:
        return 0.0
    ok = sum(1 for q in qs if set(run_top.get(q.id, [])[:3]) & set(q.labels))
    return round(ok / len(qs), 4)


def margin(questions: list[Question], per_question: dict[str, dict[str, dict[str, float]]], method: str, baseline: str,
           measure: str = "nDCG@10", resamples: int = 2000, seed: int = 0) -> dict[str, float]:
    """Mean paired difference ``method - baseline`` over ``questions``, with a 95% bootstrap interval.

    The questions are resampled with replacement (seeded, so a report is reproducible): on 85 questions a
    difference of 0.01 is well inside the noise, and the interval says so.

        >>> margin(test, result["per_question"], "hybrid", "keyword-baseline")    # doctest: +SKIP
        {'mean': 0.337, 'low': 0.27, 'high': 0.40, 'n': 85}
    """
    diffs = np.array([per_question[method][q.id][measure] - per_question[baseline][q.id][measure] for q in questions])
    if diffs.size == 0:
        return {"mean": 0.0, "low": 0.0, "high": 0.0, "n": 0}
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, diffs.size, size=(resamples, diffs.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean": round(float(diffs.mean()), 4), "low": round(float(low), 4), "high": round(float(high), 4), "n": int(diffs.size)}
