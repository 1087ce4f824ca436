"""`kwiki ledger` through the real typer app (in-process), as a new user would drive it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kwiki.ledger import Ledger
from kwiki.service.cli import app

from .conftest import LEDGER

runner = CliRunner()


def run(*args: str, input: str | None = None, ok: bool = True):
    result = runner.invoke(app, ["ledger", *args], input=input)
    if ok:
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def test_add_from_flags_then_show_list_and_tree(tmp_path):
    ws = str(tmp_path / "ws")
    run("add", "-w", ws, "--task", "transpose", "--id", "v1", "--mechanism", "naive copy", "--status", "promoted",
        "--author", "person:ana")
    out = run("add", "-w", ws, "--task", "transpose", "--id", "v2", "--parent", "v1", "--kernel", "transpose_tiled",
              "--mechanism", "pad the smem tile to 32x33", "--technique", "technique-shared-memory-padding",
              "--pattern", "pattern-shared-memory-bank-conflicts", "--correct", "--correctness-detail", "6 shapes",
              "--bench", "shape=8192x8192,dtype=fp32,gpu=H100,metric=bandwidth,value=1850,baseline=1160,unit=GB/s",
              "--signal", "smem-bank-conflicts", "--metric", "dram_throughput_pct=74", "--report", "r/v2.ncu-rep",
              "--status", "rejected", "--reason", "slower on B200", "--author", "agent:bot", "--json")
    written = json.loads(out.stdout)
    assert written["parent"] == "v1" and written["benchmarks"][0]["value"] == 1850.0
    assert written["evidence"] == {"signals": ["smem-bank-conflicts"], "metrics": {"dram_throughput_pct": 74.0},
                                   "reports": ["r/v2.ncu-rep"], "notes": ""}
    shown = json.loads(run("show", "-w", ws, "transpose/v2", "--json").stdout)
    assert shown["correctness"] == {"passed": True, "detail": "6 shapes"}
    assert shown["author"] == {"kind": "agent", "name": "bot"}
    text = run("show", "-w", ws, "v2").stdout
    assert "Rejected: tried and failed" in text and "| 8192x8192 | fp32 | H100 |" in text
    listed = json.loads(run("list", "-w", ws, "--status", "rejected", "--json").stdout)
    assert [c["id"] for c in listed["candidates"]] == ["v2"]
    tree = run("tree", "-w", ws).stdout
    assert "└── * v1 [promoted] naive copy" in tree and "    └── v2 [rejected]" in tree
    assert (tmp_path / "ws" / "ledger.sqlite3").is_file() and not (tmp_path / "ws" / "candidates.jsonl").exists()


def test_add_from_a_json_document_keeps_unknown_fields_and_flags_override(tmp_path):
    ws = str(tmp_path / "ws")
    doc = {"task": "gemm", "id": "g1", "mechanism": "wgmma 128x128", "status": "candidate", "compiler": "nvcc 12.9"}
    run("add", "-w", ws, "--from-json", "-", "--status", "promoted", input=json.dumps(doc))
    (tmp_path / "c.json").write_text(json.dumps({**doc, "id": "g2", "parent": "g1"}))
    run("add", "-w", ws, "--from-json", str(tmp_path / "c.json"))
    read = Ledger(tmp_path / "ws").read()
    assert read.get("g1").status == "promoted" and read.get("g1").model_extra == {"compiler": "nvcc 12.9"}
    assert read.get("g2").parent == "g1"


def test_add_without_an_id_numbers_the_candidate(tmp_path):
    ws = str(tmp_path / "ws")
    for _ in range(3):
        run("add", "-w", ws, "--task", "t", "--mechanism", "x")
    assert [c.id for c in Ledger(tmp_path / "ws").read().candidates] == ["c001", "c002", "c003"]


@pytest.mark.parametrize("args, message", [
    (["--task", "t", "--id", "x", "--status", "maybe"], "invalid candidate"),
    (["--id", "x"], "needs a task"),
    (["--task", "t", "--bench", "shape"], "bad --bench"),
    (["--task", "t", "--metric", "occupancy=high"], "bad --metric"),
    (["--from-json", "-"], "not JSON"),
])
def test_bad_input_is_a_clear_error(tmp_path, args, message):
    result = run("add", "-w", str(tmp_path / "ws"), *args, input="{not json", ok=False)
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "ws").exists()  # refused before anything was written


def test_list_reports_the_malformed_line_and_lists_the_rest():
    result = run("list", "-w", str(LEDGER))
    assert "candidates.jsonl:21" in result.stderr and "skipped" in result.stderr
    assert len(result.stdout.strip().splitlines()) > 36
    data = json.loads(run("list", "-w", str(LEDGER), "--json").stdout)
    assert len(data["candidates"]) == 36 and data["problems"][0]["line"] == 21


def test_workspace_defaults_to_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KWIKI_LEDGER_DIR", str(LEDGER))
    assert "transpose/t03" in run("list", "--task", "transpose").stdout
    monkeypatch.delenv("KWIKI_LEDGER_DIR")
    monkeypatch.setenv("KWIKI_INDEX_DIR", str(tmp_path / "idx"))
    run("add", "--task", "t", "--id", "a")
    assert (tmp_path / "ledger" / "ledger.sqlite3").exists()


def test_show_unknown_candidate_is_an_error():
    result = run("show", "-w", str(LEDGER), "nope", ok=False)
    assert result.exit_code == 2 and "no candidate" in result.stderr


def test_import_a_workspace_then_again_adds_nothing(tmp_path):
    ws = str(tmp_path / "ws")
    first = json.loads(run("import", str(LEDGER), "-w", ws, "--json").stdout)
    assert len(first["added"]) == 36 and first["problems"][0]["line"] == 21
    again = json.loads(run("import", str(LEDGER), "-w", ws, "--json").stdout)
    assert again["added"] == [] and len(again["unchanged"]) == 36
    imported, original = Ledger(tmp_path / "ws").read(), Ledger(LEDGER).read()
    assert [c.key for c in imported.candidates] == [c.key for c in original.candidates]
    assert imported.get("t11").benchmarks == original.get("t11").benchmarks
    assert imported.get("t16").model_extra == {"reviewer": "ana"}


def test_import_a_folder_of_json_files(tmp_path):
    src = tmp_path / "drafts"
    src.mkdir()
    (src / "one.json").write_text(json.dumps({"task": "t", "id": "a", "status": "rejected", "reason": "wrong"}))
    (src / "many.json").write_text(json.dumps([{"task": "t", "id": "b", "parent": "a"}, {"task": "t"}]))
    (src / "bad.json").write_text("{")
    out = json.loads(run("import", str(src), "-w", str(tmp_path / "ws"), "--json").stdout)
    assert sorted(out["added"]) == ["t/a", "t/b"]
    assert len(out["problems"]) == 2


def test_tree_json_is_flat_rows(tmp_path):
    data = json.loads(run("tree", "-w", str(LEDGER), "--task", "transpose", "--json").stdout)
    (tree,) = data["tasks"]
    assert tree["task"] == "transpose" and len(tree["rows"]) == 17
    assert [r["id"] for r in tree["rows"] if r["on_promoted_path"]] == ["t00", "t01", "t03", "t07", "t11", "t15"]


def test_an_unknown_parent_is_refused_with_the_nearest_ids(tmp_path):
    ws = str(tmp_path / "ws")
    run("add", "-w", ws, "--task", "transpose", "--id", "t01", "--mechanism", "stage a tile")
    run("add", "-w", ws, "--task", "transpose", "--id", "t02", "--mechanism", "pad it")
    result = run("add", "-w", ws, "--task", "transpose", "--id", "t03", "--parent", "t10", "--mechanism", "x", ok=False)
    assert result.exit_code == 2 and "unknown parent 't10'" in result.stderr
    assert "nearest: transpose/t01" in result.stderr
    assert Ledger(tmp_path / "ws").keys() == ["transpose/t01", "transpose/t02"]


@pytest.mark.slow
def test_an_unknown_technique_is_refused_against_the_index(tmp_path, mini_index, monkeypatch):
    monkeypatch.setenv("KWIKI_INDEX_DIR", str(mini_index))
    ws = str(tmp_path / "ws")
    result = run("add", "-w", ws, "--task", "t", "--pattern", "pattern-mini-tial", ok=False)
    assert result.exit_code == 2 and "unknown pattern id 'pattern-mini-tial'" in result.stderr
    assert "nearest: pattern-mini-tail" in result.stderr
    run("add", "-w", ws, "--task", "t", "--pattern", "pattern-mini-tail", "--mechanism", "known page")
    assert [c.patterns for c in Ledger(tmp_path / "ws").read().candidates] == [["pattern-mini-tail"]]


def test_status_lineage_attempts_and_migrate(workspace):
    ws = str(workspace)
    out = json.loads(run("migrate", "-w", ws, "--json").stdout)
    assert out["imported_jsonl"]["candidates"] == 36 and out["schema_version"] >= 2
    run("status", "-w", ws, "transpose/t12", "rejected", "--reason", "misaligned on B200")
    assert Ledger(workspace).get("t12").status == "rejected"
    text = run("attempts", "-w", ws, "--kernel", "transpose_tiled", "--technique", "technique-smem-swizzling").stdout
    assert [line.split()[0] for line in text.splitlines() if not line.startswith(" ")] == ["transpose/t04", "transpose/t12", "transpose/t16"]
    assert "misaligned on B200" in text
    lin = json.loads(run("lineage", "-w", ws, "t11", "--json").stdout)
    assert [a["id"] for a in lin["ancestors"]] == ["t00", "t01", "t03", "t07"]
    assert [r["id"] for r in lin["descendants"]] == ["t14", "t15"]
    tree = run("lineage", "-w", ws, "t11").stdout
    assert "transpose/t07 [promoted]" in tree and "t15 [promoted]" in tree
    bad = run("status", "-w", ws, "t11", "maybe", ok=False)
    assert bad.exit_code == 2 and "unknown status" in bad.stderr
