"""The console script, run as a user runs it (from another folder)."""

import json
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.slow


def kwiki(*args, cwd, index=None):
    exe = shutil.which("kwiki")
    assert exe, "the kwiki console script is not installed"
    cmd = [exe, *args] + (["--index-dir", str(index)] if index else [])
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_version_and_help(tmp_path):
    out = kwiki("--version", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("kwiki ")


def test_search_json_is_the_http_document(tmp_path, corpus_index, http):
    out = kwiki("search", "bank conflicts", "-k", "5", "--json", cwd=tmp_path, index=corpus_index)
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    api = http.get("/search", params={"q": "bank conflicts", "k": 5}).json()
    assert [h["id"] for h in cli["hits"]] == [h["id"] for h in api["hits"]]
    assert set(cli) == set(api)


def test_search_says_what_it_also_searched(tmp_path, corpus_index):
    out = kwiki("search", "warp schedulrs", "-k", "3", cwd=tmp_path, index=corpus_index)
    assert out.returncode == 0, out.stderr
    assert "also searched: schedulrs -> schedul" in out.stdout


def test_search_says_which_clause_each_hit_answers(tmp_path, corpus_index):
    q = "DRAM throughput is 85% of peak, the kernel stalls on long scoreboard and the L2 hit rate is 30%"
    out = kwiki("search", q, "-k", "3", cwd=tmp_path, index=corpus_index)
    assert out.returncode == 0, out.stderr
    assert "matched clause by clause" in out.stdout
    answers = [line.split("answers: ", 1)[1].strip('"') for line in out.stdout.splitlines() if "answers: " in line]
    assert len(answers) == 3 and all(a in q for a in answers)


def test_page_and_missing_index_message(tmp_path, corpus_index):
    out = kwiki("page", "pattern-tail-effect", "--json", cwd=tmp_path, index=corpus_index)
    assert out.returncode == 0 and json.loads(out.stdout)["page_id"] == "pattern-tail-effect"
    out = kwiki("search", "x", cwd=tmp_path, index=tmp_path / "nothing")
    assert out.returncode == 2 and "kwiki ingest" in out.stderr


def test_ingest_reports_and_reuses_the_embedding_cache(tmp_path):
    from ..conftest import DATA

    first = kwiki("ingest", "--corpus", str(DATA / "mini"), "--json", cwd=tmp_path, index=tmp_path / "idx")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["manifest"]["embedded"] > 0
    assert any("malformed YAML" in s["reason"] for s in doc["report"]["skipped"])
    again = kwiki("ingest", "--corpus", str(DATA / "mini"), "--json", "--force", cwd=tmp_path, index=tmp_path / "idx")
    assert json.loads(again.stdout)["manifest"]["embedded"] == 0  # rebuilt, every vector from the cache
    same = kwiki("ingest", "--corpus", str(DATA / "mini"), "--json", cwd=tmp_path, index=tmp_path / "idx")
    doc = json.loads(same.stdout)
    assert doc["unchanged"] and doc["manifest"]["build_id"] == json.loads(again.stdout)["manifest"]["build_id"]
