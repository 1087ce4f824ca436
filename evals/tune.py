"""Fit ranking parameters on one corpus's dev questions and validate them on the other corpus.

    python -m kwiki.evals.tune --fit corpus --check kernelwiki [--rounds 2] [--adapter NAME]

Coordinate ascent over the candidate values of ``GRID`` (each parameter in turn, the best value kept), scored by
mean nDCG@10 of the shipped method on the *fit* suite's dev split only; every step also prints the *check*
suite's dev figure, so a value that helps one corpus and hurts the other shows at once. Fresh, real and test
questions are never read. The suites' indexes must exist (``kwiki eval`` builds them).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from kwiki.index.params import RankingParams
from kwiki.index.search import Searcher

from .questions import Question, load_suite
from .runner import SHIPPED, run_method, score

#: Candidate values per parameter: the shipped value and values on both sides of it.
GRID: dict[str, list[object]] = {
    "bm25_weight": [0.3, 0.45, 0.6],
    "vector_weight": [0.4, 0.55, 0.7],
    "rollup_extra": [0.0, 0.1, 0.2],
    "signal_floor_no_ncu": [0.5, 0.9, 1.3],
    "signal_boost": [0.0, 0.1, 0.2],
    "source_intent_prior": [1.0, 1.2, 1.4],
    "fix_share": [0.0, 0.2, 0.4],
    "related_lift": [0.0, 0.2],
    "default_prior": [0.8, 1.0],
    "type_prior": [{}, {"source-doc": 1.0, "source-paper": 1.0, "source-blog": 1.0, "source-contest": 1.0},
                   {"source-pr": 1.0}],
    "expansion_weight": [0.1, 0.25, 0.5],
    "sentence_margin": [0.0, 0.03, 0.06],
}


def ndcg(searcher: Searcher, questions: list[Question], params: RankingParams) -> float:
    per_q = score(questions, run_method(searcher, questions, SHIPPED, params=params))
    return round(statistics.fmean(v["nDCG@10"] for v in per_q.values()), 4)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", default="corpus")
    ap.add_argument("--check", default="kernelwiki")
    ap.add_argument("--index-base", type=Path, default=Path(".kwiki/eval"))
    ap.add_argument("--adapter", default=None)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    tag = f"+{args.adapter}" if args.adapter else ""
    fit = Searcher.open(args.index_base / f"{args.fit}{tag}")
    check = Searcher.open(args.index_base / f"{args.check}{tag}")
    fit_q = [q for q in load_suite(args.fit) if q.split == "dev"]
    check_q = [q for q in load_suite(args.check) if q.split == "dev"]
    params = RankingParams()
    best = ndcg(fit, fit_q, params)
    print(json.dumps({"start": {"fit": best, "check": ndcg(check, check_q, params)}}), flush=True)
    for _ in range(args.rounds):
        for name, values in GRID.items():
            for value in values:
                trial = params.with_overrides({name: json.dumps(value)})
                if trial == params:
                    continue
                got = ndcg(fit, fit_q, trial)
                print(json.dumps({"param": name, "value": value, "fit": got, "check": ndcg(check, check_q, trial)}),
                      flush=True)
                if got > best + 0.001:  # a gain under 0.001 on ~300 questions is noise
                    best, params = got, trial
    changed = {k: v for k, v in params.model_dump().items() if v != RankingParams().model_dump()[k]}
    print(json.dumps({"fitted": changed, "fit": best, "check": ndcg(check, check_q, params)}))


if __name__ == "__main__":
    main()
