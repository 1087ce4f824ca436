"""Load test of the ledger: N processes append and read at once for a fixed time; afterwards every write is there.

Each worker process opens the ledger (a workspace's SQLite file, or a PostgreSQL database) and loops until the
deadline over a fixed mix of operations:

* a new candidate with its own id, whose parent is the worker's previous one (a lineage chain per worker);
* a new candidate with an automatic id (``cNNN``, chosen under the ledger's lock: no two writers get the same);
* a new version of one of its earlier candidates (status and reason changed);
* reads: one candidate by key (it must be what the worker last wrote: read-your-writes), a text search, the
  ancestors of its newest candidate (a recursive query), and a filtered list.

Every worker reports what it wrote; the parent then checks the ledger holds all of it: every candidate with the
content of its last version, one ``candidate_versions`` row per write, unique automatic ids, each worker's chain
intact. Throughput and latency are reported, never asserted (the suite's test runs the same code for a few
seconds and checks completeness only)::

    python benchmarks/ledger_load.py                         # 20 processes, 60 s, SQLite and PostgreSQL
    python benchmarks/ledger_load.py --backend sqlite --processes 4 --duration 5 --json out.json

PostgreSQL is a throwaway cluster started by :class:`PgCluster` (``initdb``/``pg_ctl`` from
``/usr/lib/postgresql/*/bin`` on a free loopback port, in a temp dir, removed afterwards), or ``--pg-url URL``.
Exit status 1 when a write is missing or a worker failed.

Measured 2026-12-02, 20 processes x 60 s, on the project's 2-core machine shared with other jobs (load 13-14);
every write present on both (README, "The candidate ledger"; docs/ledger.md)::

    backend     writes (per s)  reads (per s)  append p50/p95 ms  get p50/p95 ms  search p50/p95 ms  ancestors p50/p95 ms
    sqlite      3906 (65.1)     3942 (65.7)    22.6 / 1707        0.5 / 3.9       17.7 / 65.8        1.9 / 23.4
    postgres    4408 (73.5)     4437 (74.0)    58.1 / 152         20.7 / 76.4     33.1 / 119         29.7 / 122
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pwd
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: The operation mix of one worker loop (weights): writes of three kinds, then reads.
MIX = {"append": 4, "auto": 2, "version": 2, "get": 3, "search": 2, "ancestors": 2, "list": 1}
#: A worker starts its clock when the go file appears; how long it waits for it before giving up.
START_WAIT_S = 120.0


class ClusterUnavailable(RuntimeError):
    """PostgreSQL could not be started here (no binaries, no unprivileged user to run them as)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise ClusterUnavailable("no initdb found (install Debian's postgresql package: apt-get install postgresql)")


class PgCluster:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (trust auth, user ``kwiki``) in a temp dir.

    PostgreSQL refuses to run as root: as root the cluster runs as the ``postgres`` user (Debian's package
    creates it) through ``runuser``.
    """

    def __init__(self, fsync: bool = True) -> None:
        self.fsync = fsync
        self.dir: Path | None = None
        self.port = 0
        self.prefix: list[str] = []

    @property
    def url(self) -> str:
        return f"postgresql://kwiki@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 120) -> None:
        done = subprocess.run([*self.prefix, *args], capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise ClusterUnavailable(f"{Path(args[0]).name} failed: {(done.stderr or done.stdout).strip()[-800:]}")

    def start(self) -> "PgCluster":
        bin_dir = _pg_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="kwiki-pg-"))
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise ClusterUnavailable("running as root and there is no 'postgres' user to run PostgreSQL as") from None
            runuser = shutil.which("runuser")
            if runuser is None:
                raise ClusterUnavailable("running as root and runuser is missing")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self.prefix = [runuser, "-u", "postgres", "--"]
        data = self.dir / "data"
        self._run(str(bin_dir / "initdb"), "-D", str(data), "-U", "kwiki", "--auth=trust", "-E", "UTF8", "--no-sync")
        self.port = _free_port()
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not self.fsync:
            opts += " -c fsync=off -c synchronous_commit=off"
        self._run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(self.dir / "log"), "-w", "-t", "60", "-o", opts, "start")
        return self

    def stop(self) -> None:
        if self.dir is None:
            return
        try:
            self._run(str(_pg_bin() / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop", timeout=60)
        except (ClusterUnavailable, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def new_schema(self) -> str:
        """A URL whose connections use a fresh schema of their own (one ledger per test or run)."""
        import psycopg

        name = f"k_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return f"{self.url}?options=-csearch_path%3D{name}"

    def __enter__(self) -> "PgCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------- the worker
def _open(spec: str) -> Any:
    from kwiki.ledger import Ledger

    return Ledger(url=spec) if spec.startswith(("postgresql://", "postgres://")) else Ledger(Path(spec))


def worker(spec: str, name: str, duration: float, go: Path, out: Path, seed: int) -> None:
    from kwiki.ledger import Candidate

    led = _open(spec)
    rng = random.Random(seed)
    ops = [op for op, w in MIX.items() for _ in range(w)]
    written: dict[str, dict[str, Any]] = {}  # key -> {"mechanism", "status", "versions"}
    chain: list[str] = []
    auto: list[str] = []
    lat: dict[str, list[float]] = {op: [] for op in MIX}
    errors: list[str] = []
    waited = time.monotonic()
    while not go.exists():
        if time.monotonic() - waited > START_WAIT_S:
            raise SystemExit("no go signal")
        time.sleep(0.005)
    deadline = time.monotonic() + duration
    i = 0
    while time.monotonic() < deadline:
        op = rng.choice(ops) if chain else "append"
        t = time.perf_counter()
        try:
            if op == "append":
                cid = f"{name}-{i:05d}"
                mech = f"{name} change {i}: tile {rng.choice([16, 32, 64])} with {rng.choice(['padding', 'swizzle', 'tma', 'coarsening'])}"
                c = led.append(Candidate(id=cid, task="load", kernel=f"kernel_{name}", parent=chain[-1] if chain else None,
                                         mechanism=mech, techniques=["technique-shared-memory-padding"],
                                         benchmarks=[{"shape": "4096", "gpu": "H100", "metric": "bw", "value": i, "baseline": 1}]))
                chain.append(c.key)
                written[c.key] = {"mechanism": mech, "status": "candidate", "versions": 1}
            elif op == "auto":
                mech = f"{name} auto {i}"
                c = led.append(Candidate(id="c000", task="auto", mechanism=mech), auto_id=True)
                auto.append(c.key)
                written[c.key] = {"mechanism": mech, "status": "candidate", "versions": 1}
            elif op == "version":
                key = rng.choice(chain)
                old = led.get(key)
                c = led.append(old.model_copy(update={"status": "rejected", "reason": f"{name} rejected it at {i}"}))
                written[key]["status"] = "rejected"
                written[key]["versions"] += 1
            elif op == "get":
                key = rng.choice(chain)
                got = led.get(key)
                if got.mechanism != written[key]["mechanism"] or got.status != written[key]["status"]:
                    errors.append(f"read {key}: {got.status} {got.mechanism!r}, wrote {written[key]}")
            elif op == "search":
                led.search(f"{name} change tile padding", k=10)
            elif op == "ancestors":
                up = led.ancestors(chain[-1])
                if [c.key for c in up] != chain[:-1]:
                    errors.append(f"ancestors of {chain[-1]}: {len(up)} rows, expected {len(chain) - 1}")
            elif op == "list":
                led.read(task="load", status="rejected")
        except Exception as exc:  # noqa: BLE001 - every failure is counted and reported, the loop goes on
            errors.append(f"{op}: {type(exc).__name__}: {exc}"[:500])
        lat[op].append((time.perf_counter() - t) * 1000)
        i += 1
    led.close()
    out.write_text(json.dumps({"name": name, "written": written, "chain": chain, "auto": auto, "lat": lat, "errors": errors}))


# ---------------------------------------------------------------------------------------------- the run
def run_load(spec: str, processes: int, duration: float, workdir: Path) -> dict[str, Any]:
    """Start ``processes`` workers against ``spec`` for ``duration`` s, then check the ledger. Returns the report."""
    workdir.mkdir(parents=True, exist_ok=True)
    go = workdir / f"go-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    outs = [workdir / f"w{n:02d}-{go.name}.json" for n in range(processes)]
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", spec, f"w{n:02d}", str(duration), str(go), str(out), str(n)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for n, out in enumerate(outs)]
    # let every worker import and open the ledger before the clock starts
    time.sleep(min(10.0, 1.0 + 0.3 * processes))
    go.touch()
    started = time.monotonic()
    failed: list[str] = []
    for p in procs:
        _, err = p.communicate(timeout=duration + 600)
        if p.returncode != 0:
            failed.append(err.decode(errors="replace")[-1500:])
    wall = time.monotonic() - started
    results = [json.loads(o.read_text()) for o in outs if o.exists()]
    return {**verify(spec, results), "processes": processes, "duration_s": duration, "wall_s": round(wall, 1),
            "worker_failures": failed, "backend": "postgres" if spec.startswith("postgres") else "sqlite",
            **_figures(results, duration)}


def verify(spec: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    """What the workers wrote against what the ledger holds."""
    led = _open(spec)
    have = {c.key: c for c in led.read().candidates}
    missing, wrong, versions_wrong = [], [], []
    writes = 0
    for r in results:
        for key, w in r["written"].items():
            writes += w["versions"]
            c = have.get(key)
            if c is None:
                missing.append(key)
                continue
            if c.mechanism != w["mechanism"] or c.status != w["status"]:
                wrong.append(key)
            if len(led.versions(key)) != w["versions"]:
                versions_wrong.append(key)
        if r["chain"] and [c.key for c in led.ancestors(r["chain"][-1])] != r["chain"][:-1]:
            wrong.append(f"chain of {r['name']}")
    autos = [k for r in results for k in r["auto"]]
    led.close()
    return {"writes": writes, "candidates": len(have), "missing": missing, "wrong": wrong, "versions_wrong": versions_wrong,
            "auto_ids": len(autos), "auto_ids_unique": len(set(autos)) == len(autos),
            "read_errors": [e for r in results for e in r["errors"]][:20],
            "complete": not missing and not wrong and not versions_wrong and len(set(autos)) == len(autos)}


def _figures(results: list[dict[str, Any]], duration: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op in MIX:
        xs = sorted(x for r in results for x in r["lat"][op])
        if xs:
            out[op] = {"n": len(xs), "per_s": round(len(xs) / duration, 1), "p50_ms": round(statistics.median(xs), 2),
                       "p95_ms": round(xs[int(0.95 * (len(xs) - 1))], 2), "max_ms": round(xs[-1], 1)}
    writes = sum(out.get(op, {}).get("n", 0) for op in ("append", "auto", "version"))
    reads = sum(out.get(op, {}).get("n", 0) for op in ("get", "search", "ancestors", "list"))
    out["writes_per_s"] = round(writes / duration, 1)
    out["reads_per_s"] = round(reads / duration, 1)
    return out


def _table(reports: list[dict[str, Any]]) -> str:
    lines = ["| backend | processes | s | writes (per s) | reads (per s) | append p50 / p95 ms | get p50 / p95 ms | "
             "search p50 / p95 ms | ancestors p50 / p95 ms | every write present |", "|---" * 10 + "|"]
    for r in reports:
        def pp(op: str) -> str:
            return f"{r[op]['p50_ms']} / {r[op]['p95_ms']}" if op in r else "-"
        lines.append(f"| {r['backend']} | {r['processes']} | {r['duration_s']:g} | {r['writes']} ({r['writes_per_s']}) | "
                     f"{sum(r[o]['n'] for o in ('get', 'search', 'ancestors', 'list') if o in r)} ({r['reads_per_s']}) | "
                     f"{pp('append')} | {pp('get')} | {pp('search')} | {pp('ancestors')} | "
                     f"{'yes' if r['complete'] and not r['worker_failures'] else 'NO'} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--processes", type=int, default=20)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--pg-url", help="an existing PostgreSQL database (a fresh schema is NOT made: give an empty one)")
    ap.add_argument("--json", type=Path, help="write the reports here")
    args = ap.parse_args()
    reports = []
    with tempfile.TemporaryDirectory(prefix="kwiki-ledger-load-") as tmp:
        work = Path(tmp)
        if args.backend in ("sqlite", "both"):
            reports.append(run_load(str(work / "ws"), args.processes, args.duration, work))
        if args.backend in ("postgres", "both"):
            if args.pg_url:
                reports.append(run_load(args.pg_url, args.processes, args.duration, work))
            else:
                with PgCluster() as pg:
                    reports.append(run_load(pg.new_schema(), args.processes, args.duration, work))
    for r in reports:
        print(json.dumps({k: v for k, v in r.items() if k not in MIX}, indent=None)[:2000])
    print(_table(reports))
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1))
    return 0 if all(r["complete"] and not r["worker_failures"] for r in reports) else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        spec, name, duration, go, out, seed = sys.argv[2:8]
        worker(spec, name, float(duration), Path(go), Path(out), int(seed))
    else:
        sys.exit(main())
