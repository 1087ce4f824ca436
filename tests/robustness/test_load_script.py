"""benchmarks/load.py keeps working: a short run against the corpus index reports 0 errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..conftest import REPO
from .conftest import cli_env

pytestmark = pytest.mark.slow


def test_load_script_short_run(corpus_index, tmp_path):
    out = tmp_path / "load.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "load.py"), "--index-dir", str(corpus_index),
         "--clients", "8", "--duration", "4", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=cli_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["errors"] == 0 and report["requests"] > 0 and report["server_alive_after"]
    assert report["throughput_rps"] > 0
    assert report["latency_ms"]["p50"] <= report["latency_ms"]["p95"] <= report["latency_ms"]["p99"]
    assert report["rss_mb"]["before"] > 100  # the model and index really are in the server process
    assert "throughput" in proc.stdout and "p99" in proc.stdout


def test_queries_come_from_the_eval_questions():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import load
    finally:
        sys.path.pop(0)
    queries = load.load_queries()
    assert len(queries) > 300 and all(isinstance(q, str) and q.strip() for q in queries)
    assert load.HOST == "127.0.0.1"
