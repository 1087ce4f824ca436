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

    mats = []
    for name in ("corpus+lora-r16-e3", "kernelwiki+lora-r16-e3"):
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,10,100", help="multiples of today's ~6.3k chunks")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--kinds", default="ivf_pq,ivf_hnsw_sq", help="approximate indexes to measure")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
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
