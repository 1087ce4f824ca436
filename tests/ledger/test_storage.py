"""The ledger's database on both backends: lineage in recursive SQL, attempts, text search, transactions,
versioned migrations, and (SQLite) the import of a JSONL-era workspace on its first write."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading

import pytest

from kwiki.errors import LedgerUnavailable
from kwiki.ledger import DB_FILE, MIGRATIONS, SCHEMA_VERSION, Candidate, Ledger
from tests.conftest import REPO

from .conftest import LEDGER


def _chain(led: Ledger, n: int, task: str = "deep") -> None:
    led.append_many([Candidate(id=f"d{i:04d}", task=task, parent=f"d{i - 1:04d}" if i else None) for i in range(n)])


def test_ancestors_and_descendants(fixture_ledger):
    assert [c.id for c in fixture_ledger.ancestors("transpose/t15")] == ["t00", "t01", "t03", "t07", "t11"]
    assert [c.id for c in fixture_ledger.descendants("t07")] == ["t08", "t09", "t10", "t11", "t12", "t13", "t14", "t15"]
    assert fixture_ledger.ancestors("t00") == [] and fixture_ledger.descendants("t16") == []
    assert fixture_ledger.ancestors("gemm-bf16/g18") == []  # its parent gx9 was lost: the chain ends there


def test_lineage_of_any_depth_and_a_parent_cycle(make_ledger):
    led = make_ledger()
    _chain(led, 1500)  # far deeper than any recursion limit of Python code
    assert len(led.ancestors("deep/d1499")) == 1499 and led.ancestors("deep/d1499")[0].id == "d0000"
    assert len(led.descendants("deep/d0000")) == 1499
    led.append_many([Candidate(id="x", task="loop", parent="y"), Candidate(id="y", task="loop", parent="x")])
    assert [c.key for c in led.ancestors("loop/x")] == ["loop/y"]
    assert [c.key for c in led.descendants("loop/x")] == ["loop/y"]


def test_rejected_attempts_of_a_mechanism_on_a_kernel(fixture_ledger):
    swizzle = fixture_ledger.attempts(kernel="transpose_tiled", technique="technique-smem-swizzling")
    assert [c.id for c in swizzle] == ["t04", "t16"]
    assert [c.id for c in fixture_ledger.attempts(kernel="transpose_tiled", technique="smem-swizzling", status=None)] == ["t04", "t12", "t16"]
    assert [c.id for c in fixture_ledger.attempts(kernel="transpose_tiled", mechanism="swizzle tile")] == ["t04", "t16"]
    assert [c.id for c in fixture_ledger.attempts(kernel="gemm_wgmma", technique="technique-smem-swizzling")] == ["g13"]
    assert fixture_ledger.attempts(kernel="no_such_kernel") == []


def test_text_search_finds_candidates_with_their_status(fixture_ledger):
    top = [c.key for c, _ in fixture_ledger.search("bank conflicts in the transpose kernel", k=5)]
    assert "transpose/t03" in top  # the padding that fixed the conflicts
    assert all(k.startswith("transpose/") for k in top)
    failed = fixture_ledger.search("what was already tried and failed", k=30, status="rejected")
    assert len(failed) == sum(1 for c in fixture_ledger.read().candidates if c.status == "rejected")
    assert fixture_ledger.search("", k=5) == [] and fixture_ledger.search("zzqx", k=5) == []
    scores = [s for _, s in fixture_ledger.search("tail effect stream-K", k=10)]
    assert scores == sorted(scores, reverse=True)


def test_user_text_is_never_query_syntax(fixture_ledger):
    for q in ['"unbalanced', "NEAR(a b", "a AND OR NOT", "tile* ^x", "col:tile", "it's (x) | y & !z <-> w"]:
        fixture_ledger.search(q, k=3)  # no syntax error reaches the caller


def test_a_new_candidate_is_searchable_at_once(make_ledger):
    led = make_ledger()
    led.append(Candidate(id="a", task="t", mechanism="stage the operand in tensor memory"))
    assert [c.key for c, _ in led.search("tensor memory", k=3)] == ["t/a"]
    led.append(Candidate(id="a", task="t", mechanism="stage the operand in registers", status="rejected"))
    assert led.search("tensor memory", k=3) == []  # the new version replaced the old one's text
    assert [c.status for c, _ in led.search("registers", k=3)] == ["rejected"]


def test_a_reader_never_sees_a_half_written_candidate(make_ledger):
    """A write transaction in flight: another connection sees nothing of it until it commits, then all of it."""
    from kwiki.ledger.db import _write

    led = make_ledger()
    other = Ledger(led.root) if led.root is not None else Ledger(url=led.url)
    with led._backend.tx(write=True) as tx:
        _write(tx, Candidate(id="a", task="t", mechanism="first half"), "2026-01-01T00:00:00+00:00")
        _write(tx, Candidate(id="b", task="t", parent="a", mechanism="second half"), "2026-01-01T00:00:00+00:00")
        assert other.count() == 0 and other.search("half", k=5) == []
    assert other.keys() == ["t/a", "t/b"] and len(other.search("half", k=5)) == 2
    other.close()


def test_threads_adding_with_automatic_ids_get_distinct_ones(make_ledger):
    led = make_ledger()
    errors: list[BaseException] = []

    def add(n: int) -> None:
        try:
            for i in range(10):
                led.append(Candidate(id="c000", task="auto", mechanism=f"{n}-{i}"), auto_id=True)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    cands = led.read(task="auto").candidates
    assert sorted(c.id for c in cands) == [f"c{i:03d}" for i in range(1, 41)]
    assert sorted(c.mechanism for c in cands) == sorted(f"{n}-{i}" for n in range(4) for i in range(10))


def test_schema_is_versioned_and_migrations_run_once_in_order(make_ledger):
    led = make_ledger()
    out = led.migrate()
    assert out["schema_version"] == SCHEMA_VERSION == MIGRATIONS[-1].version
    assert [m["version"] for m in out["migrations"]] == [m.version for m in MIGRATIONS] == sorted(m.version for m in MIGRATIONS)
    again = (Ledger(led.root) if led.root is not None else Ledger(url=led.url)).migrate()
    assert again["migrations"] == out["migrations"]  # applied once, not again by a second opener


def test_a_version_1_database_is_upgraded_and_its_text_indexed(tmp_path):
    """Migration 2 (text search) on a database left at version 1 with candidates in it."""
    from kwiki.ledger.db import Tx, _write

    path = tmp_path / "ws" / DB_FILE
    path.parent.mkdir()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    tx = Tx(conn, "sqlite")
    tx.run("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)")
    for sql in MIGRATIONS[0].sqlite:
        tx.run(sql)
    tx.run("INSERT INTO schema_version VALUES (1, 'v1', 'then')")
    tx.run("CREATE TABLE candidates_fts (key, title, body)")  # a stand-in so the v1 writer below can run
    _write(tx, Candidate(id="old", task="t", mechanism="warp specialized producer"), "2026-01-01T00:00:00+00:00")
    tx.run("DROP TABLE candidates_fts")
    conn.execute("COMMIT")
    conn.close()
    led = Ledger(tmp_path / "ws")
    assert [c.key for c, _ in led.search("producer", k=3)] == ["t/old"]
    assert led.migrate()["schema_version"] == SCHEMA_VERSION


def test_a_database_of_a_newer_kwiki_is_refused(make_ledger):
    led = make_ledger()
    led.migrate()
    with led._backend.tx(write=True) as tx:
        tx.run("INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)", (SCHEMA_VERSION + 1, "future", "later"))
    fresh = Ledger(led.root) if led.root is not None else Ledger(url=led.url)
    with pytest.raises(LedgerUnavailable, match="newer than this kwiki") as exc:
        fresh.count()
    assert "upgrade kwiki" in exc.value.hint


def test_an_unreachable_database_is_a_clear_error():
    led = Ledger(url="postgresql://kwiki@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(LedgerUnavailable, match="cannot reach") as exc:
        led.count()
    assert "KWIKI_LEDGER_URL" in exc.value.hint


def test_the_password_of_a_url_is_never_shown():
    led = Ledger(url="postgresql://kwiki:s3cret@db.example:5432/team")
    assert "s3cret" not in led.location and led.location == "postgresql://kwiki@db.example:5432/team"
    assert led.name == "postgresql:team"


# ---------------------------------------------------------------------------------------------- JSONL import
def test_reading_a_jsonl_workspace_changes_nothing(workspace):
    before = sorted(p.name for p in workspace.iterdir())
    led = Ledger(workspace)
    assert len(led.read().candidates) == 36 and led.read().problems[0].line == 21
    assert [c.id for c in led.ancestors("t15")] == ["t00", "t01", "t03", "t07", "t11"]
    assert sorted(p.name for p in workspace.iterdir()) == before  # no database until the first write


def test_the_first_write_imports_the_jsonl_workspace_without_loss(workspace):
    old_jsonl = (workspace / "candidates.jsonl").read_bytes()
    old_csv = (workspace / "benchmark.csv").read_bytes()
    led = Ledger(workspace)
    led.append(Candidate(id="t17", task="transpose", parent="t15", mechanism="after the import"))
    assert (workspace / DB_FILE).is_file()
    assert (workspace / "candidates.jsonl").read_bytes() == old_jsonl and (workspace / "benchmark.csv").read_bytes() == old_csv
    read = led.read()
    assert len(read.candidates) == 37 and [c.key for c in read.candidates][-1] == "transpose/t17"
    # every version of every line: t15 was written twice in the file
    assert [v.status for v in led.versions("transpose/t15")] == ["candidate", "promoted"]
    # the times recorded in the file are kept, not replaced by the import's
    assert led.get("t03").updated_at == Ledger(LEDGER).get("t03").updated_at
    # the unreadable line and rows are reported and kept with their text
    assert read.problems[0].line == 21 and "not JSON" in read.problems[0].reason
    conn = sqlite3.connect(workspace / DB_FILE)
    raw = conn.execute("SELECT raw FROM problems WHERE line = 21").fetchone()[0]
    assert raw.startswith('{"id": "g99"') and "truncated by a cra" in raw
    info = json.loads(conn.execute("SELECT value FROM meta WHERE name = 'imported_jsonl'").fetchone()[0])
    conn.close()
    assert info["candidates"] == 36 and info["versions"] == 37 and info["from"] == ["candidates.jsonl", "benchmark.csv"]
    assert [c.id for c in led.ancestors("t17")] == ["t00", "t01", "t03", "t07", "t11", "t15"]


def test_benchmark_rows_for_unknown_candidates_are_kept_as_problems(workspace):
    with open(workspace / "benchmark.csv", "a") as fh:
        fh.write("nope,transpose,1x1,fp32,H100,bandwidth,1,1,GB/s\n")
        fh.write("t03,transpose,1x1,fp32,H100,bandwidth,not-a-number,1,GB/s\n")
    led = Ledger(workspace)
    led.migrate()
    rows = [(p.file, p.line) for p in led.problems() if p.file == "benchmark.csv"]
    assert rows == [("benchmark.csv", 5), ("benchmark.csv", 6)]
    conn = sqlite3.connect(workspace / DB_FILE)
    assert conn.execute("SELECT raw FROM problems WHERE line = 6").fetchone()[0].startswith("t03,transpose,1x1")
    conn.close()


IMPORTER = r"""
import sys
from pathlib import Path
from kwiki.ledger import Candidate, Ledger
Ledger(Path(sys.argv[1])).append(Candidate(id=f"p{sys.argv[2]}", task="transpose", mechanism="first writer"))
"""


def test_two_processes_writing_first_at_once_import_once(workspace):
    env = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", IMPORTER, str(workspace), str(n)], env=env, stderr=subprocess.PIPE)
             for n in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    led = Ledger(workspace)
    assert led.count() == 40 and len(led.versions("transpose/t15")) == 2
    assert len(led.problems()) == 1


def test_a_dropped_connection_is_replaced(pg_cluster):
    """The server ends the ledger's connection (a restart, an idle timeout): the next call reconnects by itself."""
    import psycopg

    led = Ledger(url=pg_cluster.new_schema())
    led.append(Candidate(id="a", task="t"))
    pid = led._backend._conn().info.backend_pid
    with psycopg.connect(pg_cluster.url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))  # waits until it is gone
    assert led.keys() == ["t/a"]
    assert led._backend._conn().info.backend_pid != pid
    led.close()
