"""Load test: N concurrent clients hammer GET /search on a real kwiki server for a fixed time.

Starts the server itself (uvicorn, the same app factory ``kwiki serve`` runs) on 127.0.0.1 over
an index, drives ``--clients`` concurrent keep-alive clients with real queries taken from
``evals/questions/*.yaml`` for ``--duration`` seconds, then reports errors, throughput,
p50/p95/p99 latency and the server's resident memory before and after::

    python benchmarks/load.py                                  # 50 clients, 60 s, .kwiki/index
    python benchmarks/load.py --clients 5 --duration 5 --json out.json
    python benchmarks/load.py --workers 2                      # compare uvicorn worker counts

It only ever talks to 127.0.0.1 and stops by itself: the load lasts ``--duration`` seconds
plus at most one request time-out. Exit status 1 when any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"  # never anything else: the load stays on this machine


def load_queries(folder: Path = REPO / "evals" / "questions") -> list[str]:
    """Every ``query`` of every question file (the evals' real user questions)."""
    queries: list[str] = []
    for path in sorted(folder.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        queries += [q["query"] for q in data.get("questions", []) if isinstance(q, dict) and q.get("query")]
    if not queries:
        raise SystemExit(f"no questions found in {folder}")
    return queries


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    """Direct and indirect child pids (uvicorn --workers forks worker processes)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rss_mb(pid: int) -> float:
    """Resident memory of the server process and its workers, in MiB (Linux /proc)."""
    total = 0
    for p in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def start_server(index_dir: Path, port: int, workers: int, embed_threads: int | None) -> subprocess.Popen:
    env = dict(os.environ, KWIKI_INDEX_DIR=str(index_dir), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if embed_threads:
        env["KWIKI_EMBED_THREADS"] = str(embed_threads)
    cmd = [sys.executable, "-m", "uvicorn", "kwiki.service.app:create_app", "--factory", "--host", HOST,
           "--port", str(port), "--workers", str(workers), "--log-level", "warning", "--no-access-log"]
    return subprocess.Popen(cmd, env=env, cwd=REPO, start_new_session=True)


def wait_ready(base: str, procs: list[subprocess.Popen], timeout: float = 300) -> dict:
    """``/health`` of ``base`` once it answers 200; fails when one of ``procs`` (the servers behind it) exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise SystemExit(f"a server exited before {base} was ready")
        try:
            r = httpx.get(f"{base}/health", timeout=5)
            if r.status_code == 200:
                return r.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("server not ready in time")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the workers go with it
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


async def drive(base: str, queries: list[str], clients: int, duration: float, timeout: float, seed: int) -> dict:
    """``clients`` loops, each sending one request at a time until ``duration`` has passed."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    rng = random.Random(seed)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=timeout, limits=limits) as client:
        started = time.monotonic()
        deadline = started + duration

        async def one_client() -> None:
            while time.monotonic() < deadline:
                q = rng.choice(queries)
                t0 = time.perf_counter()
                try:
                    r = await client.get("/search", params={"q": q, "k": 10})
                    ok = r.status_code == 200 and "hits" in r.json()
                    reason = f"http {r.status_code}"
                except (httpx.HTTPError, ValueError) as exc:
                    ok, reason = False, type(exc).__name__
                if ok:
                    latencies.append((time.perf_counter() - t0) * 1000)
                else:
                    errors[reason] = errors.get(reason, 0) + 1

        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.monotonic() - started
    lat = sorted(latencies)

    def pct(p: float) -> float:
        return round(lat[min(len(lat) - 1, int(p / 100 * len(lat)))], 1) if lat else float("nan")

    return {
        "requests": len(lat) + sum(errors.values()),
        "errors": sum(errors.values()),
        "error_kinds": errors,
        "seconds": round(elapsed, 1),
        "throughput_rps": round(len(lat) / elapsed, 1),
        "latency_ms": {"p50": pct(50), "p95": pct(95), "p99": pct(99), "max": round(lat[-1], 1) if lat else None,
                       "mean": round(statistics.fmean(lat), 1) if lat else None},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", type=Path, default=REPO / ".kwiki" / "index",
                    help="index to serve (built from corpus/ with `kwiki ingest` when missing)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    ap.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    ap.add_argument("--embed-threads", type=int, default=None, help="KWIKI_EMBED_THREADS for the server")
    ap.add_argument("--timeout", type=float, default=30.0, help="client time-out per request, seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write the report here")
    args = ap.parse_args(argv)

    if not (args.index_dir / "current" / "manifest.json").exists() and not (args.index_dir / "manifest.json").exists():
        print(f"no index at {args.index_dir}: building it from corpus/", file=sys.stderr)
        subprocess.run([sys.executable, "-c", "from kwiki.service.cli import main; main()", "ingest", "--quiet",
                        "--index-dir", str(args.index_dir)], check=True, cwd=REPO)
    queries = load_queries()
    port = free_port()
    base = f"http://{HOST}:{port}"
    proc = start_server(args.index_dir, port, args.workers, args.embed_threads)
    try:
        health = wait_ready(base, [proc])
        # one request per worker-ish so every model is loaded before "before" is measured
        for q in queries[: 4 * args.workers]:
            httpx.get(f"{base}/search", params={"q": q}, timeout=120)
        rss_before = rss_mb(proc.pid)
        result = asyncio.run(drive(base, queries, args.clients, args.duration, args.timeout, args.seed))
        rss_after = rss_mb(proc.pid)
        alive = proc.poll() is None
    finally:
        stop_server(proc)
    report = {
        "clients": args.clients, "workers": args.workers, "duration_s": args.duration, "queries": len(queries),
        "cpus": os.cpu_count(), "index_pages": health["index"]["counts"].get("pages"),
        "index_chunks": health["index"]["counts"].get("chunks"),
        **result, "rss_mb": {"before": rss_before, "after": rss_after}, "server_alive_after": alive,
    }
    lat = report["latency_ms"]
    print(f"{report['requests']} requests from {args.clients} clients in {report['seconds']} s "
          f"({args.workers} worker{'s' if args.workers > 1 else ''}, {report['cpus']} CPUs, "
          f"{report['index_chunks']} chunks): {report['errors']} errors {report['error_kinds'] or ''}")
    print(f"throughput {report['throughput_rps']} req/s; latency p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
          f"p99 {lat['p99']} ms, max {lat['max']} ms")
    print(f"server RSS {rss_before} MiB before, {rss_after} MiB after")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["errors"] == 0 and alive else 1


if __name__ == "__main__":
    sys.exit(main())
