"""Vector search at 1x, 10x and 100x today's corpus: exact dot product vs lancedb's approximate indexes.

Today's two corpora hold ~6.3k chunks; a team's corpus may hold a hundred times more. What grows with the corpus
is the vector stage (an exact dot product over every chunk, then a top-k); tantivy's BM25 grows sublinearly. This
measures that stage alone, at 6.3k, 63k and 630k chunks, for:

- ``exact``: the in-memory numpy product kwiki ships (one BLAS thread, as the server runs it);
- ``ivf_pq``: lancedb's IVF-PQ index (partitions = sqrt(N), 48 sub-vectors, ``nprobes`` 20, refine x10);
- ``ivf_hnsw_sq``: lancedb's IVF with an HNSW graph per partition over scalar-quantized vectors.

**The synthetic corpus.** The real chunk vectors of both eval indexes (shipped adapter), each copied with
Gaussian noise (sigma = 0.032 per dimension, then renormalized: a copy keeps cosine ~0.85 with its original, so
copies are near neighbours but not duplicates). The queries are the real eval questions, embedded by the
shipped model. Recall@10 of an approximate index is measured against exact search over the same vectors.

    python benchmarks/scale.py [--sizes 1,10,100] [--queries 300]

**Through the real search path** (``--builds``): real builds of the synthetic corpora (``benchmarks/ingest_memory.py``
makes them with ``kwiki ingest``) opened by ``Searcher.open`` as the server opens them. For each real eval question
the plan is made (the query embedded) and the pipeline's vector stage (``pipeline.retrieve_vectors``) timed: on a
build with approximate indexes, through them; the same stage with an exact ``VectorIndex`` over the same vectors gives
the reference for recall@10 (of the stage's top 10 chunks) and its own time. Whole ``Searcher.search`` calls are timed
too, and the process's resident memory is read after opening the build.

    python benchmarks/scale.py --builds /tmp/kwiki-scale/index-x1,/tmp/kwiki-scale/index-x10 [--queries 200]

**The vector stage at 100x without a 100x ingest** (``--stage-of BUILD --sizes 1,10,100``): the chunk and sentence
vectors of a real build, copied with noise as above (a sentence's copy stands for the same copy of its chunk, a
chunk's copy belongs to the same copy of its page), written with the build's own ``vectors.TableWriter`` and given
the build's approximate indexes (``vectors.create_ann_index``) where a table reaches ``settings.ANN_MIN_ROWS``; then
the pipeline's ``retrieve_vectors`` and the page-level cosine list (``VectorIndex.page_max``, the other vector work
of a search) over the plans the real Searcher makes for the real questions, against the same over an exact index.

Not a test: figures depend on the machine; run it on an otherwise idle machine. Results go to
``benchmarks/results/scale.json`` and the table into the README by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
NOISE_SIGMA = 0.032  # per-dimension noise of a synthetic copy: cos(copy, original) ~ 0.85 in 384 dimensions
K = 10


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def real_vectors() -> np.ndarray:
    from kwiki.index.build import current_build
    from kwiki.index.vectors import load_matrix
    from kwiki.settings import Settings

    adapter = Settings().embed_adapter
    mats = []
    for name in (f"corpus+{adapter}", f"kernelwiki+{adapter}"):
        folder = REPO / ".kwiki" / "eval" / name
        if not folder.exists():
            sys.exit(f"no eval index at {folder}: run `kwiki eval --suite all` once first")
        mats.append(load_matrix(current_build(folder) / "vectors")[1])
    return np.concatenate(mats).astype(np.float32)


def queries(n: int) -> np.ndarray:
    from kwiki.evals.questions import load_suite
    from kwiki.index.vectors import Embedder
    from kwiki.settings import Settings

    texts = [q.query for suite in ("corpus", "kernelwiki") for q in load_suite(suite)]
    rng = np.random.default_rng(0)
    pick = rng.choice(len(texts), size=min(n, len(texts)), replace=False)
    return Embedder(threads=2, adapter=Settings().embed_adapter).encode([texts[i] for i in pick])


def synthetic(real: np.ndarray, factor: int, rng: np.random.Generator) -> np.ndarray:
    if factor == 1:
        return real
    out = np.empty((len(real) * factor, real.shape[1]), dtype=np.float32)
    out[: len(real)] = real
    for i in range(1, factor):
        copy = real + rng.normal(0, NOISE_SIGMA, real.shape).astype(np.float32)
        copy /= np.linalg.norm(copy, axis=1, keepdims=True)
        out[i * len(real):(i + 1) * len(real)] = copy
    return out


def exact_topk(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    scores = matrix @ q
    top = np.argpartition(-scores, K - 1)[:K]
    return top[np.argsort(-scores[top])]


def timed(fn, qs: np.ndarray) -> tuple[list[float], list[np.ndarray]]:
    times, results = [], []
    for q in qs:
        t = time.perf_counter()
        results.append(fn(q))
        times.append((time.perf_counter() - t) * 1000)
    return times, results


def recall(approx: list[np.ndarray], exact: list[np.ndarray]) -> float:
    return statistics.fmean(len(set(map(int, a)) & set(map(int, e))) / K for a, e in zip(approx, exact))


def lance_index(matrix: np.ndarray, kind: str, folder: Path):
    import lancedb
    import pyarrow as pa

    from kwiki.index.vectors import _vector_column

    db = lancedb.connect(str(folder))
    table = db.create_table(kind, pa.table({"row": pa.array(np.arange(len(matrix)), pa.int64()), "vector": _vector_column(matrix)}))
    t = time.perf_counter()
    partitions = max(1, int(np.sqrt(len(matrix))))
    if kind == "ivf_pq":
        table.create_index(metric="dot", vector_column_name="vector", index_type="IVF_PQ", num_partitions=partitions,
                           num_sub_vectors=48)
    else:
        table.create_index(metric="dot", vector_column_name="vector", index_type="IVF_HNSW_SQ",
                           num_partitions=max(1, partitions // 8))
    return table, time.perf_counter() - t


def rss_mib() -> float:
    """This process's resident set size now."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


#: Scores this close are one score (float32 dot products of the same vectors in another order).
TIE_EPS = 1e-5


def through_searcher(build: Path, texts: list[str]) -> dict:
    """The vector stage and whole searches of the real Searcher over one build, against exact search."""
    from kwiki.index import vectors
    from kwiki.index.pipeline import Candidates, SearchOptions, retrieve_vectors
    from kwiki.index.search import Searcher

    t = time.perf_counter()
    searcher = Searcher.open(build)
    open_s = time.perf_counter() - t
    rss_open = rss_mib()
    v = searcher.vindex
    exact = vectors.VectorIndex(v.matrix, v.sentences, v.sentence_rows, v.sentence_texts, v.is_question)
    params = searcher.params
    searcher.search(texts[0])  # warm: the model, the caches
    stage_t, exact_t, search_t, recalls, tie_recalls = [], [], [], [], []
    for text in texts:
        plan = searcher.plan(text, 10, None, SearchOptions(), 2000, 100, params)
        c = Candidates()
        t = time.perf_counter()
        retrieve_vectors(plan, c, params, searcher)
        stage_t.append((time.perf_counter() - t) * 1000)
        got = c.vector
        if v.ann_chunks is not None:
            searcher.vindex = exact
            ref = Candidates()
            t = time.perf_counter()
            retrieve_vectors(plan, ref, params, searcher)
            exact_t.append((time.perf_counter() - t) * 1000)
            searcher.vindex = v
            recalls.append(len({r for r, _ in got[:K]} & {r for r, _ in ref.vector[:K]}) / K)
            # ties: the approximate path scores its candidates exactly, so a returned chunk scoring at least the exact
            # 10th is as good a 10th (the titles-only copies share their originals' sentence vectors: many ties)
            if len(ref.vector) >= K:
                tenth = ref.vector[K - 1][1]
                tie_recalls.append(sum(1 for _, sc in got[:K] if sc >= tenth - TIE_EPS) / K)
        t = time.perf_counter()
        searcher.search(text)
        search_t.append((time.perf_counter() - t) * 1000)
    row = {"build": build.name, "chunks": int(v.matrix.shape[0]), "sentences_and_questions": int(v.sentences.shape[0]),
           "pages": len(searcher.pages), "vector_search": v.describe(params), "open_s": round(open_s, 1),
           "rss_after_open_mib": rss_open, "stage_p50_ms": round(pct(stage_t, 50), 2), "stage_p95_ms": round(pct(stage_t, 95), 2),
           "search_p50_ms": round(pct(search_t, 50), 2), "search_p95_ms": round(pct(search_t, 95), 2)}
    if exact_t:
        row |= {"exact_stage_p50_ms": round(pct(exact_t, 50), 2), "exact_stage_p95_ms": round(pct(exact_t, 95), 2),
                "recall@10": round(statistics.fmean(recalls), 4),
                "recall@10_ties": round(statistics.fmean(tie_recalls), 4) if tie_recalls else None}
    row |= {"rss_end_mib": rss_mib(), "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "load_avg": round(os.getloadavg()[0], 2)}
    return row


def stage_at(build: Path, factor: int, texts: list[str], folder: Path) -> dict:
    """The vector work of a search over ``factor`` noisy copies of ``build``'s vectors (see the module docstring)."""
    from types import SimpleNamespace

    from kwiki.index import vectors
    from kwiki.index.pipeline import Candidates, SearchOptions, retrieve_vectors
    from kwiki.index.search import Searcher
    from kwiki.settings import ANN_MIN_ROWS

    base = Searcher.open(build)
    params = base.params
    plans = [base.plan(t, 10, None, SearchOptions(), 2000, 100, params) for t in texts]
    v = base.vindex
    rng = np.random.default_rng(0)
    n_chunks, n_pages = v.matrix.shape[0], len(base.page_keys)
    matrix = synthetic(np.asarray(v.matrix), factor, rng)
    sentences = synthetic(np.asarray(v.sentences), factor, rng)
    sentence_rows = np.concatenate([v.sentence_rows + i * n_chunks for i in range(factor)])
    is_question = np.tile(v.is_question, factor)
    texts_all = v.sentence_texts * factor
    pages = np.concatenate([base.page_index + i * n_pages for i in range(factor)])
    ann: dict[str, vectors.AnnTable] = {}
    build_s: dict[str, float] = {}
    for name, mat in ((vectors.TABLE, matrix), (vectors.SENTENCES, sentences)):
        if len(mat) < ANN_MIN_ROWS:
            continue
        writer = vectors.TableWriter(folder, name)
        for start in range(0, len(mat), 50_000):
            writer.add({"chunk_id": [str(i) for i in range(start, min(start + 50_000, len(mat)))]}, mat[start:start + 50_000])
        writer.close()
        t = time.perf_counter()
        vectors.create_ann_index(folder, name)
        build_s[name] = round(time.perf_counter() - t, 1)
        ann[name] = vectors.AnnTable(folder, name)
    approx = vectors.VectorIndex(matrix, sentences, sentence_rows, texts_all, is_question,
                                 ann_chunks=ann.get(vectors.TABLE), ann_sentences=ann.get(vectors.SENTENCES))
    exact = vectors.VectorIndex(matrix, sentences, sentence_rows, texts_all, is_question)
    rss = rss_mib()
    out: dict = {"factor": factor, "chunks": len(matrix), "sentences_and_questions": len(sentences),
                 "vector_search": approx.describe(params), "ann_build_s": build_s, "rss_mib": rss}
    for label, index in (("exact", exact), ("approx", approx)) if ann else (("exact", exact),):
        fake = SimpleNamespace(vindex=index, page_index=pages)
        stage_t, page_t, tops = [], [], []
        for plan in plans:
            c = Candidates()
            t = time.perf_counter()
            retrieve_vectors(plan, c, params, fake)  # type: ignore[arg-type]
            stage_t.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            index.page_max(plan.vector, pages, n_pages * factor, None, params.candidates, params)
            page_t.append((time.perf_counter() - t) * 1000)
            tops.append([r for r, _ in c.vector[:K]])
        out[label] = {"stage_p50_ms": round(pct(stage_t, 50), 2), "stage_p95_ms": round(pct(stage_t, 95), 2),
                      "page_max_p50_ms": round(pct(page_t, 50), 2), "page_max_p95_ms": round(pct(page_t, 95), 2)}
        out[f"{label}_tops"] = tops
    if ann:
        hits = [len(set(a) & set(e)) / K for a, e in zip(out["approx_tops"], out["exact_tops"])]
        long = [len(p.vectors) > 1 for p in plans]  # type: ignore[arg-type]
        out["recall@10"] = round(statistics.fmean(hits), 4)
        out["recall@10_one_vector"] = round(statistics.fmean([h for h, lg in zip(hits, long) if not lg] or [float("nan")]), 4)
        out["recall@10_clauses"] = round(statistics.fmean([h for h, lg in zip(hits, long) if lg] or [float("nan")]), 4)
        out["queries_with_clauses"] = sum(long)
    out = {k: v for k, v in out.items() if not k.endswith("_tops")}
    out |= {"max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "load_avg": round(os.getloadavg()[0], 2)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,10,100", help="multiples of today's ~6.3k chunks")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--kinds", default="ivf_pq,ivf_hnsw_sq", help="approximate indexes to measure")
    ap.add_argument("--builds", help="comma-separated index folders: measure through the real Searcher instead")
    ap.add_argument("--stage-of", type=Path, help="a real build: its vectors copied --sizes times (the vector stage only)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.builds or args.stage_of:
        from kwiki.evals.questions import load_suite

        texts = [q.query for suite in ("corpus", "kernelwiki") for q in load_suite(suite)]
        pick = np.random.default_rng(0).choice(len(texts), size=min(args.queries, len(texts)), replace=False)
    if args.stage_of:
        out = REPO / "benchmarks" / "results" / "scale-stage.json"
        rows = []
        for factor in (int(x) for x in args.sizes.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                row = stage_at(args.stage_of, factor, [texts[i] for i in pick], Path(tmp))
            print(json.dumps(row), flush=True)
            rows.append(row)
            out.write_text(json.dumps({"queries": len(pick), "noise_sigma": NOISE_SIGMA, "build": str(args.stage_of.name),
                                       "command": "python benchmarks/scale.py --stage-of BUILD --sizes ...",
                                       "rows": rows}, indent=1) + "\n")
        return
    if args.builds:
        out = REPO / "benchmarks" / "results" / "scale-searcher.json"
        rows = json.loads(out.read_text())["rows"] if out.exists() else []
        for build in args.builds.split(","):
            row = through_searcher(Path(build), [texts[i] for i in pick])
            print(json.dumps(row), flush=True)
            rows = [r for r in rows if r["chunks"] != row["chunks"]] + [row]
            out.write_text(json.dumps({"queries": len(pick), "command": "python benchmarks/scale.py --builds ...",
                                       "rows": sorted(rows, key=lambda r: r["chunks"])}, indent=1) + "\n")
        return
    from kwiki.index.vectors import _one_blas_thread

    _one_blas_thread()
    real = real_vectors()
    qs = queries(args.queries)
    rng = np.random.default_rng(0)
    rows = []
    for factor in (int(x) for x in args.sizes.split(",")):
        matrix = synthetic(real, factor, rng)
        ex_t, ex_r = timed(lambda q: exact_topk(matrix, q), qs)
        row = {"chunks": len(matrix), "matrix_mib": round(matrix.nbytes / 2**20, 1),
               "exact_p50_ms": round(pct(ex_t, 50), 3), "exact_p95_ms": round(pct(ex_t, 95), 3)}
        if len(matrix) >= 20_000:  # IVF training needs rows; below this exact search is the answer anyway
            with tempfile.TemporaryDirectory() as tmp:
                for kind in args.kinds.split(","):
                    table, build_s = lance_index(matrix, kind, Path(tmp))

                    def ann(q: np.ndarray, table=table, kind=kind) -> np.ndarray:
                        search = table.search(q, vector_column_name="vector").metric("dot").limit(K).select(["row"])
                        if kind == "ivf_pq":
                            search = search.nprobes(20).refine_factor(10)
                        else:
                            search = search.nprobes(20)
                        return search.to_arrow().column("row").to_numpy()

                    ann(qs[0])  # warm the index
                    t, r = timed(ann, qs)
                    row |= {f"{kind}_build_s": round(build_s, 1), f"{kind}_p50_ms": round(pct(t, 50), 3),
                            f"{kind}_p95_ms": round(pct(t, 95), 3), f"{kind}_recall@10": round(recall(r, ex_r), 4)}
        row["max_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = REPO / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    (out / f"scale-{args.sizes.replace(',', '-')}.json").write_text(json.dumps({"queries": len(qs), "noise_sigma": NOISE_SIGMA, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
