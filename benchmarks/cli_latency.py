"""How long a `kwiki` command takes, end to end, as a user (or an agent's shell) runs it: the client path beside
the in-process one.

    python benchmarks/cli_latency.py                      # .kwiki/index (built from corpus/ if missing), 15 runs
    python benchmarks/cli_latency.py --runs 30 --index-dir /srv/kwiki/index --json

It starts ``kwiki serve`` on a free loopback port over the index, then times, each in a fresh process:

- ``kwiki search Q``: with that server (found at KWIKI_PORT, the local index's build) and with ``--local`` (the old
  path: load the index and the model, then search);
- ``kwiki page ID``: with the server, in process with ``--local`` (the build's pages only) and the old in-process
  path (``Searcher.open`` of the whole index, then the page: what ``kwiki page`` did before, without typer's
  import, so the ratio is if anything too kind to it);
- ``kwiki signals``: with the server and with ``--local``;
- ``python -c pass``: the interpreter's own start, the floor under every command (on a loaded machine every
  figure grows, this one with them).

Reports the median and p90 wall time of each, the median CPU time of the process (which a loaded machine hardly
changes, where wall time grows with the load), and old / new as ratios (the README's "Performance" table). Targets:
search with a server <= 0.35 s median, page without one <= 1.0 s. Timing is of the whole process: interpreter start,
imports, the request, the output.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERIES = ["only 8 of my 132 SMs are busy near the end of the kernel", "long scoreboard stalls after each LDG",
           "UMMA tensor memory allocation", "bank conflicts in the shared memory transpose", "warp specialization"]
PAGE = "pattern-tail-effect"
OLD_PAGE = "from kwiki.index.search import Searcher; import sys; print(Searcher.open(sys.argv[1]).page(sys.argv[2]).title)"
TARGETS = {"search, server": 0.35, "page, no server": 1.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``cmd``; CPU time hardly grows with the machine's load, wall time
    does (a 2-core box shared with other work)."""
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    took, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-1000:]}")
    if "note:" in done.stderr:
        raise SystemExit(f"{' '.join(cmd)}: {done.stderr.strip()}")  # e.g. the server serves another build
    return took, cpu


def stats(samples: list[tuple[float, float]]) -> dict[str, float]:
    wall = sorted(w for w, _ in samples)
    return {"median_s": round(statistics.median(wall), 3), "p90_s": round(wall[int(0.9 * (len(wall) - 1))], 3),
            "cpu_median_s": round(statistics.median(c for _, c in samples), 3), "runs": len(wall)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", type=Path, default=None, help="index root (default: the settings' index_dir)")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    from kwiki.settings import load_settings

    index_dir = args.index_dir or load_settings().index_dir
    exe = shutil.which("kwiki", path=str(Path(sys.executable).parent)) or "kwiki"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWIKI_")} | {
        "HF_HUB_OFFLINE": "1", "KWIKI_INDEX_DIR": str(index_dir), "KWIKI_PORT": str(port)}
    server = subprocess.Popen([exe, "serve", "--port", str(port), "--build-if-missing"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import httpx

        deadline = time.monotonic() + 900
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("kwiki serve did not start")
            time.sleep(0.2)
        cases = {
            "python -c pass (the floor)": lambda i: [sys.executable, "-c", "pass"],
            "search, server": lambda i: [exe, "search", QUERIES[i % len(QUERIES)], "-k", "10"],
            "search, in process (old path)": lambda i: [exe, "search", QUERIES[i % len(QUERIES)], "-k", "10", "--local"],
            "page, server": lambda i: [exe, "page", PAGE],
            "page, no server": lambda i: [exe, "page", PAGE, "--local"],
            "page, whole index (old path)": lambda i: [sys.executable, "-c", OLD_PAGE, str(index_dir), PAGE],
            "signals, server": lambda i: [exe, "signals"],
            "signals, in process": lambda i: [exe, "signals", "--local"],
        }
        for make in cases.values():  # warm the file cache and the server once
            timed(make(0), env)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for i in range(args.runs):  # interleaved, so a burst of load hits every case alike
            for name, make in cases.items():
                samples[name].append(timed(make(i), env))
    finally:
        server.terminate()
        server.wait(timeout=30)
    figures = {name: stats(s) for name, s in samples.items()}
    med = {name: f["median_s"] for name, f in figures.items()}
    ratios = {
        "search: in process / server": round(med["search, in process (old path)"] / med["search, server"], 1),
        "page: whole index / pages only": round(med["page, whole index (old path)"] / med["page, no server"], 1),
        "page: whole index / server": round(med["page, whole index (old path)"] / med["page, server"], 1),
        "signals: in process / server": round(med["signals, in process"] / med["signals, server"], 1),
    }
    doc = {"figures": figures, "ratios": ratios, "targets_s": TARGETS, "load_average": os.getloadavg(),
           "cpus": os.cpu_count(), "index": str(index_dir)}
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"{'command':34s} {'median':>8s} {'p90':>8s} {'cpu':>8s}  (runs: {args.runs}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus)")
    for name, f in figures.items():
        target = f"  target <= {TARGETS[name]} s" if name in TARGETS else ""
        print(f"{name:34s} {f['median_s']:7.3f}s {f['p90_s']:7.3f}s {f['cpu_median_s']:7.3f}s{target}")
    for name, r in ratios.items():
        print(f"{name:34s} x{r}")


if __name__ == "__main__":
    main()
