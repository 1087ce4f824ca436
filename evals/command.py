"""``kwiki eval``: build (or refresh) an index per suite, run every method, write the report, apply the gate.

    kwiki eval --suite all                      # both suites, every method
    kwiki eval --suite corpus --methods hybrid,bm25 --gate
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import yaml

from kwiki.errors import BadRequest

from .questions import Question, load_suite, load_unanswerable
from .report import git_revision, update_readme, write_run
from .runner import METHODS, SHIPPED, evaluate, floor_rates, margin, top3_rate

if TYPE_CHECKING:
    from kwiki.index.search import Searcher
    from kwiki.index.vectors import Embedder

EVALS_DIR = Path(__file__).resolve().parent
REPO = EVALS_DIR.parent
FLOOR_FILE = EVALS_DIR / "floor.yaml"
SUITE_ROOTS = {"corpus": ("kwiki", REPO / "corpus"), "kernelwiki": ("kernelwiki-snapshot", REPO.parent / "shared" / "kernelwiki-snapshot")}


def load_floor() -> dict[str, Any]:
    return yaml.safe_load(FLOOR_FILE.read_text()) if FLOOR_FILE.exists() else {}


#: Progress of a build stage: (label, done, total), e.g. ("kernelwiki: embed", 120, 4579).
Stage = Callable[[str, int, int], None]


def suite_index(suite: str, root: Path, name: str, base: Path, threads: int, embedder: "Embedder",
                stage: Stage | None = None) -> Searcher:
    """Build the suite's own index with ``embedder``'s model (embeddings come from the shared cache, so this is
    cheap after the first run); one folder per suite and adapter. ``stage`` hears the build's progress."""
    from kwiki.index.build import build_index
    from kwiki.index.search import Searcher
    from kwiki.ingest.corpus import CorpusRoot

    if not root.is_dir():
        raise BadRequest(f"corpus for suite '{suite}' not found at {root}", hint="pass --kernelwiki PATH")
    folder = base / (f"{suite}+{embedder.adapter}" if embedder.adapter else suite)
    if stage:
        stage(f"{suite}: index", 0, 1)
    build_index(folder, [CorpusRoot(name, root)], embedder=embedder, threads=threads, cache_dir=base.parent / "cache",
                progress=(lambda step, done, total: stage(f"{suite}: {step}", done, total)) if stage else None)
    if stage:
        stage(f"{suite}: index", 1, 1)
    return Searcher.open(folder, embedder=embedder, threads=threads)


def run_eval(suites: list[str], methods: list[str], index_base: Path, *, threads: int = 2, kernelwiki: Path | None = None,
             out_dir: Path | None = None, readme: bool = False, progress: Callable[[str, int], None] | None = None,
             overrides: dict[str, str] | None = None, adapter: str | None = None,
             splits: list[str] | None = None, files: list[str] | None = None, author_labels: bool = False,
             stage: Stage | None = None) -> dict[str, Any]:
    """Every method on every suite. ``overrides`` set ranking parameters (``RankingParams``) for the run;
    ``adapter`` names the embedding adapter the suites' indexes are built with (None: the base model); ``splits``
    keeps only those questions (while developing: ``["dev", "test"]``, so the fresh ones stay unseen); ``files``
    keeps only the questions of those question files (stems: ``["corpus-blind6", "kernelwiki-blind6"]``, a new
    set's first run); ``author_labels`` scores with the authors' labels alone, the judged pool left out (a first
    run before its pool is judged).

    Every suite's corpus is checked before any work starts; ``progress`` hears each question, ``stage`` each
    index build. With ``out_dir``, the run folder is written after every suite, so a run stopped in the second
    suite keeps the first (its stamp says ``incomplete``: the suites not finished)."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise BadRequest(f"unknown methods {unknown}", hint=f"one of: {', '.join(METHODS)}")
    from kwiki.index.params import RankingParams
    from kwiki.index.vectors import Embedder

    params = RankingParams().with_overrides(overrides or {})
    for suite in suites:  # every corpus is checked before any work starts
        root = kernelwiki if suite == "kernelwiki" and kernelwiki else SUITE_ROOTS[suite][1]
        if not root.is_dir():
            raise BadRequest(f"corpus for suite '{suite}' not found at {root}", hint="pass --kernelwiki PATH")
    chosen = {suite: select_questions(load_suite(suite), splits, files, author_labels) for suite in suites}
    if files:
        known = {q.file for suite in suites for q in load_suite(suite)}
        if unknown_files := sorted(set(files) - known):
            raise BadRequest(f"no question file {unknown_files[0]!r} in the suites {suites}",
                             hint=f"one of: {', '.join(sorted(known))}")
        suites = [s for s in suites if chosen[s]]
    embedder = Embedder(threads=threads, adapter=adapter)
    base_embedder: Embedder | None = None
    results: dict[str, Any] = {}
    created_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    stamp = {"revision": git_revision(REPO), "created_at": created_at,
             "methods": methods, "overrides": overrides or {}, "model": embedder.model_id}
    run_dir = out_dir / created_at.replace(":", "") if out_dir is not None else None
    for n, suite in enumerate(suites, 1):
        name, root = SUITE_ROOTS[suite]
        if suite == "kernelwiki" and kernelwiki:
            root = kernelwiki
        questions = chosen[suite]
        searcher = suite_index(suite, root, name, index_base, threads, embedder, stage)
        base = None  # the naive fusion always embeds with the published model
        if adapter and "naive-fusion" in methods:
            base_embedder = base_embedder or Embedder(threads=threads)
            base = suite_index(suite, root, name, index_base, threads, base_embedder, stage)
            if base.manifest.corpus_hash != searcher.manifest.corpus_hash:
                raise BadRequest(f"the {suite} corpus changed between its two index builds (shipped and base model)",
                                 hint="run the eval again once nothing is writing to the corpus")
        res = evaluate(searcher, questions, methods, progress=(lambda: progress(suite, len(questions) * len(methods))) if progress else None,
                       params=params, base_searcher=base)
        res["manifest"] = searcher.manifest.model_dump()
        if SHIPPED in methods:
            test = [q for q in questions if q.split == "test"]
            res["top3_symptom_ncu_test"] = top3_rate(test, res["runs"][SHIPPED], ("symptom", "ncu-signal"))
            res["top3_symptom_ncu_all"] = top3_rate(questions, res["runs"][SHIPPED], ("symptom", "ncu-signal"))
            res["floor"] = floor_rates(searcher, questions, res.get("no_match", []), load_unanswerable(), params)
            res["margins"] = {split: {base: margin(qs, res["per_question"], SHIPPED, base)
                                      for base in ("naive-fusion", "bm25", "keyword-baseline") if base in methods}
                              for split in ("test", "fresh", "real")
                              if (qs := [q for q in questions if q.split == split])}
            res["failures"] = [
                {"id": q.id, "category": q.category, "query": q.query, "got": res["runs"][SHIPPED].get(q.id, [])[:3],
                 "wanted": [d for d, r in q.relevant.items() if r == 2]}
                for q in test if not set(res["runs"][SHIPPED].get(q.id, [])[:3]) & set(q.labels)
            ]
        results[suite] = res
        if run_dir is not None and n < len(suites):  # what finished is kept if a later suite fails or is stopped
            write_run(run_dir, results, stamp | {"incomplete": suites[n:]})
    paths: dict[str, Path] = {}
    if run_dir is not None:
        paths = write_run(run_dir, results, stamp)
        if readme:
            update_readme(EVALS_DIR / "README.md", paths["report"].read_text())
    return {"stamp": stamp, "suites": results, "paths": {k: str(v) for k, v in paths.items()}}


def select_questions(questions: list[Question], splits: list[str] | None = None, files: list[str] | None = None,
                     author_labels: bool = False) -> list[Question]:
    """The questions of ``splits`` and ``files`` (None: all), with the judged pool dropped for ``author_labels``.

    >>> from kwiki.evals.questions import Question
    >>> qs = [Question(id="a", query="q", category="symptom", split="fresh", file="corpus-blind6",
    ...                relevant={"p": 2}, judged={"r": 1})]
    >>> [q.labels for q in select_questions(qs, files=["corpus-blind6"], author_labels=True)]
    [{'p': 2}]
    >>> select_questions(qs, splits=["dev"])
    []
    """
    kept = [q for q in questions if (not splits or q.split in splits) and (not files or q.file in files)]
    return [q.model_copy(update={"judged": {}}) for q in kept] if author_labels else kept


def gate(results: dict[str, Any]) -> list[str]:
    """Messages for every suite whose shipped nDCG@10 is below the floor in evals/floor.yaml."""
    failures = []
    for suite, rule in load_floor().items():
        res = results["suites"].get(suite)
        if res is None or rule["method"] not in res["overall"]:
            continue
        value = res["overall"][rule["method"]][rule.get("group", "all")][rule.get("measure", "nDCG@10")]
        if value < rule["floor"]:
            failures.append(f"{suite}: {rule['method']} {rule.get('measure', 'nDCG@10')} = {value:.4f} < floor {rule['floor']}")
    return failures
