"""Throughput of a kwiki fleet on one host: 1, 2 and 3 replicas behind haproxy, and uvicorn worker processes on one
port, each with the build's vectors copied into every process or memory-mapped from a published build; 50 clients.

    python benchmarks/fleet.py                                   # every configuration, 30 s each
    python benchmarks/fleet.py --duration 10 --only replicas     # a shorter look
    python benchmarks/fleet.py --json benchmarks/results/fleet-2026-12-02.json

What runs, all on 127.0.0.1 (haproxy from Debian's package: `apt-get install haproxy`):

- the index: ``--index-dir`` (built from corpus/ when it has none, with ``--cache-dir`` as its embedding cache), its
  current build published into ``<index-dir>/published`` (``kwiki publish``);
- ``replicas``: N ``kwiki serve`` processes, each on its own port, behind haproxy (``service/haproxy.config``: least
  connections, health check on /health); ``workers``: one ``uvicorn --workers N`` on one port, no proxy;
- ``copy``: the processes serve the index root's build (vectors read from lancedb into each process' memory, as
  before publishing existed); ``mmap``: they serve the published build (``KWIKI_BUILD``), whose ``.npy`` vectors every
  process maps read-only, so the page cache holds one copy for all;
- the load: ``benchmarks/load.py``'s clients (keep-alive, one request at a time each, the eval questions in random
  order, ``GET /search?k=10``) for ``--duration`` seconds after a warm-up;
- memory after the load, per server process, from ``/proc/PID/smaps_rollup``: RSS, and PSS (each shared page split
  between the processes that map it), anonymous and file-backed parts.

The client, haproxy and the replicas share the machine's cores; ``uptime``'s load average is recorded before and after
each run: other jobs on the machine lower every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import HOST, REPO, drive, free_port, load_queries, wait_ready  # noqa: E402 - the sibling benchmark's client

KWIKI = [sys.executable, "-c", "from kwiki.service.cli import main; main()"]


def smaps(pid: int) -> dict[str, float]:
    """RSS, PSS and its anonymous / file parts of one process, in MiB (``/proc/PID/smaps_rollup``)."""
    fields = {"Rss": "rss", "Pss": "pss", "Pss_Anon": "pss_anon", "Pss_File": "pss_file"}
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in fields:
            out[fields[name]] = round(int(rest.split()[0]) / 1024, 1)
    return out


def workers_of(pid: int) -> list[int]:
    """The worker processes uvicorn ``--workers`` spawned under ``pid`` (multiprocessing's ``spawn_main``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid and \
                        b"spawn_main" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def run(kind: str, n: int, vectors: str, index_dir: Path, build: str, haproxy: str, args: argparse.Namespace,
        queries: list[str], work: Path) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", KWIKI_INDEX_DIR=str(index_dir), KWIKI_EMBED_THREADS=str(max(1, args.cores // n)))
    env.pop("KWIKI_BUILD", None)
    if vectors == "mmap":
        env["KWIKI_BUILD"] = build  # the published build: its vectors mapped from the .npy files
    procs: list[subprocess.Popen] = []
    logs = open(work / f"{kind}-{n}-{vectors}.log", "wb")
    try:
        if kind == "replicas":
            ports = [free_port() for _ in range(n)]
            for port in ports:
                procs.append(subprocess.Popen([*KWIKI, "serve", "--port", str(port)], env=env, stdout=logs, stderr=subprocess.STDOUT,
                                              start_new_session=True))
            for port in ports:
                health = wait_ready(f"http://{HOST}:{port}", procs)
            from kwiki.service.haproxy import config

            front = free_port()
            cfg = work / "haproxy.cfg"
            cfg.write_text(config(front, [(f"r{i + 1}", f"{HOST}:{p}") for i, p in enumerate(ports)], work / "haproxy.sock"))
            lb = subprocess.Popen([haproxy, "-f", str(cfg), "-db"], stdout=logs, stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(lb)
            base = f"http://{HOST}:{front}"
            wait_ready(base, procs)
            time.sleep(1.5)  # every server's first health check passed: all in rotation
            servers = [p.pid for p in procs[:-1]]
        else:
            port = free_port()
            cmd = [sys.executable, "-m", "uvicorn", "kwiki.service.app:create_app", "--factory", "--host", HOST, "--port", str(port),
                   "--workers", str(n), "--log-level", "warning", "--no-access-log"]
            procs.append(subprocess.Popen(cmd, env=env, stdout=logs, stderr=subprocess.STDOUT, start_new_session=True))
            base = f"http://{HOST}:{port}"
            health = wait_ready(base, procs)
            servers = []
        served = health["build"]
        warm = asyncio.run(drive(base, queries, args.clients, args.warmup, args.timeout, args.seed + 1))
        if kind == "workers":  # every worker has answered by now
            servers = workers_of(procs[0].pid)
        before = loadavg()
        result = asyncio.run(drive(base, queries, args.clients, args.duration, args.timeout, args.seed))
        after = loadavg()
        memory = [smaps(pid) for pid in servers]
    finally:
        stop(procs)
        logs.close()
    row = {"kind": kind, "processes": n, "vectors": vectors, "build": served, "embed_threads": int(env["KWIKI_EMBED_THREADS"]),
           "warmup_errors": warm["errors"], **result, "memory_mib": memory,
           "pss_total_mib": round(sum(m["pss"] for m in memory), 1), "rss_total_mib": round(sum(m["rss"] for m in memory), 1),
           "loadavg_before": before, "loadavg_after": after}
    lat = row["latency_ms"]
    print(f"{kind:8s} x{n} {vectors:4s}: {row['throughput_rps']:6.1f} req/s, p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
          f"{row['errors']} errors; per process RSS {[m['rss'] for m in memory]} PSS {[m['pss'] for m in memory]} MiB "
          f"(load {before[0]:.1f} -> {after[0]:.1f})", flush=True)
    return row


def table(report: dict) -> str:
    """The runs as the README's markdown table."""
    lines = ["| processes | vectors | req/s | p50 / p95 ms | errors | RSS per process, MiB | PSS per process, MiB | PSS total, MiB | load avg |",
             "|---|---|---:|---|---:|---|---|---:|---|"]
    for r in report["runs"]:
        what = f"{r['processes']} replica{'s' if r['processes'] > 1 else ''} + haproxy" if r["kind"] == "replicas" else \
            f"{r['processes']} uvicorn workers, one port"
        lat = r["latency_ms"]
        rss = " / ".join(f"{m['rss']:.0f}" for m in r["memory_mib"])
        pss = " / ".join(f"{m['pss']:.0f}" for m in r["memory_mib"])
        lines.append(f"| {what} | {r['vectors']} | {r['throughput_rps']} | {lat['p50']:.0f} / {lat['p95']:.0f} | {r['errors']} | {rss} | {pss} | "
                     f"{r['pss_total_mib']:.0f} | {r['loadavg_before'][0]:.1f}-{r['loadavg_after'][0]:.1f} |")
    return "\n".join(lines)


def ensure_index(index_dir: Path, cache_dir: Path | None, corpora: list[str]) -> None:
    if (index_dir / "current" / "manifest.json").exists():
        return
    print(f"no index at {index_dir}: building it from {', '.join(corpora)}", file=sys.stderr, flush=True)
    from kwiki.index.build import build_index
    from kwiki.ingest.corpus import corpus_root
    from kwiki.settings import load_settings

    settings = load_settings()
    build_index(index_dir, [corpus_root(c) for c in corpora], cache_dir=cache_dir, adapter=settings.embed_adapter)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", type=Path, default=REPO / ".kwiki" / "index")
    ap.add_argument("--corpus", action="append", default=None, help="corpus to build the index from when it has none "
                    "(repeatable; default corpus/)")
    ap.add_argument("--cache-dir", type=Path, default=None, help="embedding cache for a build (default <index-dir>/cache)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of load per configuration")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="onnxruntime threads shared out: cores // processes each")
    ap.add_argument("--only", choices=["replicas", "workers"], default=None)
    ap.add_argument("--replicas", default="1,2,3")
    ap.add_argument("--workers", default="2,3")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--table", type=Path, default=None, help="print the table of an earlier run's JSON and exit")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return 0
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None)
    if haproxy is None and args.only != "workers":
        raise SystemExit("haproxy not found: apt-get install -y haproxy (or --only workers)")

    from kwiki.index.publish import publish

    ensure_index(args.index_dir, args.cache_dir, args.corpus or [str(REPO / "corpus")])
    published = publish(args.index_dir, args.index_dir / "published")
    queries = load_queries()
    plan = [("replicas", int(n)) for n in args.replicas.split(",") if args.only in (None, "replicas")]
    plan += [("workers", int(n)) for n in args.workers.split(",") if args.only in (None, "workers")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kwiki-fleet-") as tmp:
        for kind, n in plan:
            for vectors in ("copy", "mmap"):
                rows.append(run(kind, n, vectors, args.index_dir, published.build_id, haproxy or "", args, queries, Path(tmp)))
    manifest = json.loads((args.index_dir / "published" / published.build_id / "manifest.json").read_text())
    report = {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(), "clients": args.clients,
              "duration_s": args.duration, "queries": len(queries), "build": published.build_id, "counts": manifest["counts"],
              "vector_files_mib": round(sum(f.stat().st_size for f in (args.index_dir / "published" / published.build_id / "vectors")
                                            .glob("*.npy")) / 2**20, 1),
              "haproxy": subprocess.run([haproxy, "-v"], capture_output=True, text=True).stdout.splitlines()[0] if haproxy else None,
              "runs": rows}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
