"""Labeled questions: load, check and convert to TREC qrels.

    >>> qs = load_suite("corpus")                 # evals/questions/corpus*.yaml
    >>> qs[0].relevant                            # doctest: +SKIP
    {'pattern-tail-effect': 2}
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, Field

QUESTIONS_DIR = Path(__file__).resolve().parent / "questions"
CATEGORIES = ("symptom", "ncu-signal", "technique", "hardware", "kernel", "pr-lookup", "migration-language")
#: dev: may be used for tuning; test: reporting only; fresh: written blind in the seventh session, never tuned on
#: (the honest figure); real: real users' questions from public threads, never tuned on.
SPLITS = ("dev", "test", "fresh", "real")


class Question(BaseModel):
    id: str
    query: str
    category: str
    split: str = "dev"
    relevant: dict[str, int] = Field(default_factory=dict)  # the author's labels, decided from the pages
    judged: dict[str, int] = Field(default_factory=dict)  # pooled pages judged later by others (never the author's)
    note: str | None = None
    suite: str = ""
    file: str = ""  # the question file's stem (``corpus-blind6``), set by ``load_suite``

    @property
    def labels(self) -> dict[str, int]:
        """Every graded page: the author's labels, and the judged pool where the author said nothing."""
        return {**self.judged, **self.relevant}


def load_suite(suite: str, folder: Path = QUESTIONS_DIR) -> list[Question]:
    """Every question of ``suite`` from ``<suite>.yaml`` and ``<suite>-*.yaml``, ids unique."""
    out: list[Question] = []
    for path in sorted(folder.glob(f"{suite}.yaml")) + sorted(folder.glob(f"{suite}-*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for raw in data.get("questions", []):
            q = Question.model_validate({**raw, "suite": suite, "file": path.stem})
            if q.split not in SPLITS or q.category not in CATEGORIES:
                raise ValueError(f"{path.name}: question {q.id} has split '{q.split}' / category '{q.category}'; "
                                 f"splits: {', '.join(SPLITS)}; categories: {', '.join(CATEGORIES)}")
            out.append(q)
    seen: set[str] = set()
    for q in out:
        if q.id in seen:
            raise ValueError(f"duplicate question id {q.id} in suite {suite}")
        seen.add(q.id)
    return out


def load_unanswerable(folder: Path = QUESTIONS_DIR) -> list[str]:
    """The queries of ``no-answer.yaml``: questions no page of either corpus answers (the relevance floor's check)."""
    path = folder / "no-answer.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else {}
    return [str(item["query"]) for item in (data or {}).get("queries", [])]


def qrels(questions: list[Question]) -> list[tuple[str, str, int]]:
    """(query_id, doc_id, relevance) triples."""
    return [(q.id, doc, int(rel)) for q in questions for doc, rel in q.labels.items()]


def to_trec(questions: list[Question]) -> str:
    return "".join(f"{qid} 0 {doc} {rel}\n" for qid, doc, rel in qrels(questions))
