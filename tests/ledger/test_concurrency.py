"""Many processes at once: 20 writers and readers on each backend lose nothing (the load test of
``benchmarks/ledger_load.py``, for a few seconds), and two shells adding with the CLI get distinct ids."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.ledger_load import run_load
from kwiki.ledger import Ledger
from tests.conftest import REPO

#: The benchmark runs 60 s; the suite runs the same code this long, enough for hundreds of interleaved writes.
LOAD_SECONDS = 3.0
LOAD_PROCESSES = 20


def test_twenty_processes_appending_and_reading_lose_nothing(make_ledger, tmp_path):
    led = make_ledger()
    spec = str(led.root) if led.root is not None else str(led.url)
    report = run_load(spec, LOAD_PROCESSES, LOAD_SECONDS, tmp_path / "load")
    assert report["worker_failures"] == []
    assert report["missing"] == [] and report["wrong"] == [] and report["versions_wrong"] == []
    assert report["auto_ids_unique"] and report["read_errors"] == []
    assert report["complete"] and report["writes"] >= LOAD_PROCESSES  # every worker wrote at least its first candidate
    assert led.read().lines == report["writes"]  # one version row per write, none more


def _start(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_cli_writers_at_once_lose_nothing(tmp_path):
    """As a user would: two shells adding candidates with `kwiki ledger add` at the same time."""
    ws = tmp_path / "ws"
    script = ("for i in 1 2 3 4; do {kwiki} ledger add -w {ws} --task shared --mechanism \"{w} try $i\" "
              "--status rejected --reason 'slower' --author agent:{w} || exit 1; done")
    kwiki = str(Path(sys.executable).parent / "kwiki")
    procs = [_start(["bash", "-c", script.format(kwiki=kwiki, ws=ws, w=w)]) for w in ("alpha", "beta")]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    read = Ledger(ws).read()
    assert read.problems == []
    assert sorted(c.mechanism for c in read.candidates) == sorted(f"{w} try {i}" for w in ("alpha", "beta") for i in range(1, 5))
    assert sorted(c.id for c in read.candidates) == [f"c{i:03d}" for i in range(1, 9)]
