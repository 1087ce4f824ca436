"""Benchmark the main path on the combined corpora (kwiki corpus + KernelWiki snapshot).

Reports, side by side: cold ingest of the snapshot alone and of both corpora (empty embedding cache, no
model export yet), re-ingest with nothing changed,
GET /search latency p50/p95 at k=10 against a warm server, server resident memory, and vector
search by lancedb scan vs in-memory exact dot product.

    python benchmarks/search_latency.py [--kernelwiki ../shared/kernelwiki-snapshot] [--queries 300]
    python benchmarks/search_latency.py --index-dir .kwiki/index     # GET /search only, on a built index

Not a test: figures depend on the machine. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parent.parent


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def ingest(index_dir: Path, corpora: list[Path], env: dict[str, str], force: bool = False) -> tuple[float, dict]:
    cmd = ["kwiki", "ingest", "--index-dir", str(index_dir), "--json", "-q"] + [a for c in corpora for a in ("--corpus", str(c))]
    t = time.perf_counter()
    out = subprocess.run(cmd + (["--force"] if force else []), capture_output=True, text=True, check=True, env=env)
    return time.perf_counter() - t, json.loads(out.stdout)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def queries() -> list[str]:
    qs = []
    for f in sorted((REPO / "evals" / "questions").glob("*.yaml")):
        qs += [q["query"] for q in (yaml.safe_load(f.read_text()) or {}).get("questions", [])]
    return qs


def vector_compare(index_dir: Path, n: int = 50) -> dict:
    import lancedb
    import numpy as np

    from kwiki.index.build import current_build
    from kwiki.index.vectors import TABLE, load_matrix

    build = current_build(index_dir)
    table = lancedb.connect(str(build / "vectors")).open_table(TABLE)
    _, matrix = load_matrix(build / "vectors")
    rng = np.random.default_rng(0)
    qs = matrix[rng.integers(0, len(matrix), n)]
    t = time.perf_counter()
    for q in qs:
        table.search(q).metric("dot").limit(200).to_arrow()
    lance_ms = (time.perf_counter() - t) / n * 1000
    t = time.perf_counter()
    for q in qs:
        s = matrix @ q
        np.argpartition(-s, 200)[:200]
    numpy_ms = (time.perf_counter() - t) / n * 1000
    return {"rows": int(len(matrix)), "lancedb_scan_ms": round(lance_ms, 2), "numpy_dot_ms": round(numpy_ms, 2),
            "ratio": round(lance_ms / numpy_ms, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelwiki", type=Path, default=REPO.parent / "shared" / "kernelwiki-snapshot")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--index-dir", type=Path, default=None,
                    help="serve this built index and measure only GET /search (no ingest timings)")
    args = ap.parse_args()
    corpora = [REPO / "corpus"] + ([args.kernelwiki] if args.kernelwiki.is_dir() else [])
    work = Path(tempfile.mkdtemp(prefix="kwiki-bench-"))
    index_dir = args.index_dir or work / "index"
    report: dict = {"corpora": [str(c) for c in corpora], "load_average_at_start": os.getloadavg()[0]}
    # Cold means cold: an empty embedding cache and no ONNX export of the model yet (made on first use, ~8 s).
    env = {**os.environ, "KWIKI_INDEX_DIR": str(index_dir), "HF_HUB_OFFLINE": "1"}
    if args.index_dir is None:
        env["KWIKI_MODEL_CACHE"] = str(work / "models")
        measure_ingest(report, work, index_dir, corpora, env)
    serve_and_measure(report, env, args)
    json.dump(report, sys.stdout, indent=2)
    print()


def measure_ingest(report: dict, work: Path, index_dir: Path, corpora: list[Path], env: dict[str, str]) -> None:
    if len(corpora) > 1:  # the target: the snapshot alone, from cold
        cold, doc = ingest(work / "snapshot-index", corpora[1:], {**env, "KWIKI_MODEL_CACHE": str(work / "models-snapshot")})
        report["cold_ingest_snapshot_s"] = round(cold, 1)
        report["snapshot_counts"] = doc["manifest"]["counts"]
    cold, doc = ingest(index_dir, corpora, env)
    report["cold_ingest_combined_s"] = round(cold, 1)
    report["counts"] = doc["manifest"]["counts"]
    again, doc = ingest(index_dir, corpora, env)
    report["reingest_unchanged_s"] = round(again, 1)  # nothing changed: the file hash matches, no rebuild
    report["reingest_skipped"] = doc["unchanged"]
    forced, doc = ingest(index_dir, corpora, env, force=True)
    report["rebuild_from_cache_s"] = round(forced, 1)  # a full rebuild whose vectors all come from the cache
    report["rebuild_embedded"] = doc["manifest"]["embedded"]
    report["vector_search"] = vector_compare(index_dir)


def serve_and_measure(report: dict, env: dict[str, str], args: argparse.Namespace) -> None:
    server = subprocess.Popen(["kwiki", "serve", "--port", str(args.port)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{args.port}"
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        report["server_rss_mb_idle"] = round(rss_mb(server.pid), 1)
        qs = (queries() * 10)[: args.queries]
        with httpx.Client(base_url=url, timeout=30) as client:
            for q in qs[:20]:  # warm-up
                client.get("/search", params={"q": q, "k": 10})
            lat = []
            stages: dict[str, list[float]] = {}
            for q in qs:
                t = time.perf_counter()
                r = client.get("/search", params={"q": q, "k": 10})
                lat.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.text
                for name, ms in r.json().get("stages_ms", {}).items():
                    stages.setdefault(name, []).append(ms)
        report["search_ms"] = {"n": len(lat), "p50": round(statistics.median(lat), 1), "p95": round(pct(lat, 95), 1),
                               "max": round(max(lat), 1)}
        # what each pipeline stage costs (server-side; "plan" includes embedding the query)
        report["stage_ms_p50"] = {name: round(statistics.median(v), 2) for name, v in stages.items()}
        report["server_rss_mb_after"] = round(rss_mb(server.pid), 1)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
