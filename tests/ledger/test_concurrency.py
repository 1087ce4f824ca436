"""Two processes appending at once: nothing lost, nothing interleaved, no id given twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kwiki.ledger import Ledger
from tests.conftest import REPO

WRITER = r"""
import sys, time
from pathlib import Path
from kwiki.ledger import Candidate, Ledger
ws, name, n, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
while not go.exists():
    time.sleep(0.001)
led = Ledger(ws)
pad = name * 20000  # ~20-40 KB lines: far over PIPE_BUF, so only the lock keeps them whole
for i in range(n):
    led.append(Candidate(id=f"{name}{i}", task="race", mechanism=f"{name} change {i}", notes=pad,
                         benchmarks=[{"shape": "1x1", "gpu": "H100", "metric": "m", "value": i, "baseline": 1}]))
    led.append(Candidate(id="c000", task="auto", mechanism=f"{name} auto {i}"), auto_id=True)
"""


def _start(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_processes_append_without_loss_or_interleaving(tmp_path):
    ws, go, n = tmp_path / "ws", tmp_path / "go", 150
    procs = [_start([sys.executable, "-c", WRITER, str(ws), name, str(n), str(go)]) for name in ("a", "b")]
    time.sleep(0.5)
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    lines = (ws / "candidates.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""
    records = [json.loads(ln) for ln in lines[:-1]]  # every line is one whole record
    assert len(records) == 4 * n
    read = Ledger(ws).read()
    assert read.problems == []
    race = {c.id for c in read.candidates if c.task == "race"}
    assert race == {f"{w}{i}" for w in "ab" for i in range(n)}
    for c in read.candidates:
        if c.task == "race":
            assert c.model_extra["notes"] == c.id[0] * 20000
    auto = [c for c in read.candidates if c.task == "auto"]
    assert len(auto) == 2 * n, "two writers were given the same automatic id"
    assert {c.mechanism for c in auto} == {f"{w} auto {i}" for w in "ab" for i in range(n)}
    bench = (ws / "benchmark.csv").read_text().splitlines()
    assert bench[0].startswith("candidate_id,") and len(bench) == 1 + 2 * n
    assert sum(1 for row in bench if row.startswith("candidate_id")) == 1


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
