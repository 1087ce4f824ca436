"""Which lancedb index for the approximate vector path: IVF-FLAT vs IVF-PQ (exact refine x10) vs IVF-SQ.

The raw vector stage as ``benchmarks/scale.py`` measures it (noisy copies of the real chunk vectors, real eval
questions embedded by the shipped model, top 10 by inner product), for each index kind and ``nprobes`` 10/20/40:
build time, p50/p95 latency of one query, recall@10 against exact search over the same vectors.

    python benchmarks/ann_choice.py FACTOR KIND[:PARTITIONS],...     # e.g. 100 IVF_FLAT:790,IVF_PQ

One JSON line per (kind, nprobes) on stdout; the figures kwiki's choice rests on are in
``benchmarks/results/ann-choice.json`` (``index/vectors.py``: ``ANN_INDEX``).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale as S  # noqa: E402


def main() -> None:
    import lancedb
    import pyarrow as pa

    from kwiki.index.vectors import _one_blas_thread, _vector_column

    _one_blas_thread()
    factor, kinds = int(sys.argv[1]), sys.argv[2].split(",")
    real, qs = S.real_vectors(), S.queries(100)
    m = S.synthetic(real, factor, np.random.default_rng(0))
    ex_t, ex_r = S.timed(lambda q: S.exact_topk(m, q), qs)
    print(json.dumps({"kind": "exact", "rows": len(m), "p50": round(S.pct(ex_t, 50), 2)}), flush=True)
    db = lancedb.connect(tempfile.mkdtemp())
    t = db.create_table("x", pa.table({"row": pa.array(np.arange(len(m)), pa.int64()), "vector": _vector_column(m)}))
    for kind in kinds:
        name, _, parts = kind.partition(":")
        t0 = time.perf_counter()
        kw = dict(num_sub_vectors=48) if "PQ" in name else {}
        t.create_index(metric="dot", vector_column_name="vector", index_type=name, num_partitions=int(parts) if parts else None,
                       replace=True, **kw)
        b = time.perf_counter() - t0
        for npr in (10, 20, 40):
            def ann(q, npr=npr, name=name):
                s = t.search(q, vector_column_name="vector").distance_type("dot").limit(10).nprobes(npr).select(["row", "_distance"])
                if "PQ" in name or "SQ" in name:
                    s = s.refine_factor(10)
                return s.to_arrow().column("row").to_numpy()
            ann(qs[0])
            tt, rr = S.timed(ann, qs)
            print(json.dumps({"kind": kind, "rows": len(m), "build_s": round(b, 1), "nprobes": npr, "p50": round(S.pct(tt, 50), 2),
                              "p95": round(S.pct(tt, 95), 2), "recall": round(S.recall(rr, ex_r), 3)}), flush=True)


if __name__ == "__main__":
    main()
