"""Training pairs for the domain adapter of the embedder: (question, passage, hard negative) from one corpus.

    python -m kwiki.evals.embedder.make_pairs --index .kwiki/eval/corpus --suite corpus --out pairs.jsonl

Positives: every question a page lists (``questions:``) with the section the index says it stands for, and every
*dev* question of the suite with its grade-2 pages' nearest section (test questions are never used). Hard
negatives, each from a page that is neither the positive's page nor linked from it: the best BM25 chunk
(BM25-mined, as dense retrievers are trained), and with ``--vector-negatives K`` also the K chunks the index's own
embedder ranks first (one per page) (mined from the model's mistakes, as ANCE does). Passages are what the model sees at build time (``embed_text``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

from kwiki.index.query import AliasTable, Filters, plan_query
from kwiki.index.search import Searcher
from kwiki.index.writer import embed_text

from ..questions import load_suite


def passage(s: Searcher, row: int) -> str:
    r = s.chunk_rows[row]
    return embed_text(s.pages[r["page_key"]].title, r.get("heading_path", []), r["text"])


def hard_negative(s: Searcher, query: str, avoid: set[str]) -> int | None:
    plan = plan_query(query, AliasTable(), Filters(), s.params, use_aliases=False, correct=None)
    plan.bm25.questions = False  # the pages' text, not the questions they list
    for row, _ in s.bm25.search(plan.bm25, 30, s.params):
        if s.chunk_page[row] not in avoid:
            return row
    return None


def vector_negatives(s: Searcher, vec: np.ndarray, avoid: set[str], count: int) -> list[int]:
    """The ``count`` chunks the index's embedder ranks highest, one per page, from pages outside ``avoid``."""
    scores = s.vindex.matrix @ vec
    out: list[int] = []
    seen = set(avoid)
    for row in np.argsort(-scores)[:200]:
        page = s.chunk_page[int(row)]
        if page not in seen:
            out.append(int(row))
            seen.add(page)
            if len(out) == count:
                break
    return out


def linked(s: Searcher, key: str) -> set[str]:
    p = s.pages[key]
    out = {key}
    for other in (*p.related, *p.candidate_techniques):
        found = s.find_page(other, p.corpus)
        if found is not None:
            out.add(found.key)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--suite", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vector-negatives", type=int, default=0, help="embedder-mined negatives to add per row")
    args = ap.parse_args()
    s = Searcher.open(args.index)
    v = s.vindex
    pairs: list[tuple[str, int, str, np.ndarray]] = []  # (query, positive chunk row, kind, query vector)
    for i in np.flatnonzero(v.is_question):
        pairs.append((v.sentence_texts[i], int(v.sentence_rows[i]), "listed", v.sentences[i]))
    by_id = {p.id: k for k, p in s.pages.items()}
    dev = [q for q in load_suite(args.suite) if q.split == "dev"]
    vecs = s._embedder().encode([q.query for q in dev])
    for q, vec in zip(dev, vecs):
        for pid, grade in q.relevant.items():
            key = by_id.get(pid)
            if grade == 2 and key in s.page_rows:
                rows = s.page_rows[key]
                pairs.append((q.query, rows[int(np.argmax(v.matrix[rows] @ vec))], "dev", vec))
    n = 0
    with open(args.out, "w", encoding="utf-8") as fh:
        for query, row, kind, vec in pairs:
            key = s.chunk_page[row]
            avoid = linked(s, key)
            first = hard_negative(s, query, avoid)
            if first is None:
                continue
            negs = [first]
            if args.vector_negatives:
                negs += vector_negatives(s, vec, avoid | {s.chunk_page[first]}, args.vector_negatives)
                if len(negs) < 1 + args.vector_negatives:
                    continue
            out: dict[str, object] = {"query": query, "positive": passage(s, row), "negative": passage(s, negs[0]),
                                      "page": s.pages[key].id, "kind": kind}
            if args.vector_negatives:
                out["negatives"] = [passage(s, x) for x in negs]
            fh.write(json.dumps(out) + "\n")
            n += 1
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(json.dumps({"pairs": n, "listed": sum(k == "listed" for _, _, k, _ in pairs), "dev": sum(k == "dev" for _, _, k, _ in pairs),
                      "sha256": digest, "index_build": s.manifest.build_id}))


if __name__ == "__main__":
    main()
