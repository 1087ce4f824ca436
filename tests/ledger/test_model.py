"""The candidate record and the tolerant reading of a workspace."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from kwiki.errors import BadRequest, NotFound
from kwiki.ledger import Candidate, Ledger

from .conftest import LEDGER


def test_fixture_reads_every_good_line_and_reports_the_malformed_one():
    read = Ledger(LEDGER).read()
    assert len(read.candidates) == 36
    assert {c.task for c in read.candidates} == {"transpose", "gemm-bf16"}
    assert len(read.problems) == 1
    assert read.problems[0].line == 21 and read.problems[0].file == "candidates.jsonl"
    assert "not JSON" in read.problems[0].reason
    # the lines after the malformed one are read too
    assert read.get("gemm-bf16/g18").parent == "gx9"


def test_newest_version_of_a_candidate_wins_and_keeps_its_place():
    read = Ledger(LEDGER).read()
    t15 = read.get("transpose/t15")
    assert t15.status == "promoted" and "L2" in t15.reason
    keys = [c.key for c in read.candidates]
    assert keys.index("transpose/t15") < keys.index("transpose/t16")


def test_unknown_fields_are_kept_through_an_append(tmp_path):
    t16 = Ledger(LEDGER).read().get("t16")
    assert t16.model_extra == {"reviewer": "ana"}
    led = Ledger(tmp_path)
    led.append(t16.model_copy(update={"status": "rejected"}))
    again = led.read().get("t16")
    assert again.model_extra == {"reviewer": "ana"}
    assert json.loads(led.candidates_path.read_text().splitlines()[0])["reviewer"] == "ana"


def test_benchmark_csv_rows_are_merged_into_their_candidates():
    read = Ledger(LEDGER).read()
    shapes = {(b.shape, b.gpu) for b in read.get("transpose/t11").benchmarks}
    assert shapes == {("8192x8192", "H100"), ("4096x4096", "H100")}
    # a row without a task column finds the one candidate with that id
    assert ("8192x8192", "B200") in {(b.shape, b.gpu) for b in read.get("t07").benchmarks}


def test_benchmark_rows_for_unknown_candidates_are_reported(workspace):
    with open(workspace / "benchmark.csv", "a") as fh:
        fh.write("nope,transpose,1x1,fp32,H100,bandwidth,1,1,GB/s\n")
        fh.write("t03,transpose,1x1,fp32,H100,bandwidth,not-a-number,1,GB/s\n")
    read = Ledger(workspace).read()
    reasons = [(p.file, p.line, p.reason) for p in read.problems if p.file == "benchmark.csv"]
    assert [r[1] for r in reasons] == [5, 6]
    assert "no candidate" in reasons[0][2] and "bad number" in reasons[1][2]
    assert len(read.candidates) == 36


@pytest.mark.parametrize("line, why", [
    ('{"id": "x1", "task": "t", "status": "maybe"}', "status"),
    ('{"task": "t"}', "id"),
    ('["not", "an", "object"]', "not an object"),
    ('{"id": "../etc", "task": "t"}', "id"),
    ("\xff\xfe", "not JSON"),
])
def test_invalid_records_are_skipped_with_their_line_number(tmp_path, line, why):
    good = Candidate(id="ok", task="t", mechanism="m").model_dump_json()
    (tmp_path / "candidates.jsonl").write_bytes((good + "\n" + line + "\n" + good.replace('"ok"', '"ok2"') + "\n").encode("utf-8", "surrogateescape"))
    read = Ledger(tmp_path).read()
    assert [c.id for c in read.candidates] == ["ok", "ok2"]
    assert read.problems[0].line == 2 and why in read.problems[0].reason


def test_a_torn_last_line_does_not_swallow_the_next_append(tmp_path):
    led = Ledger(tmp_path)
    led.append(Candidate(id="a", task="t"))
    with open(led.candidates_path, "ab") as fh:  # a writer that died mid-line
        fh.write(b'{"id": "b", "task": "t", "mech')
    led.append(Candidate(id="c", task="t"))
    read = led.read()
    assert [c.id for c in read.candidates] == ["a", "c"]
    assert [p.line for p in read.problems] == [2]


def test_candidate_fields_are_normalized():
    c = Candidate.model_validate({"id": "c1", "task": "t", "parent": "", "mechanism": "pad\n the   tile",
                                  "techniques": "technique-a, technique-b", "author": "agent:opus"})
    assert c.parent is None and c.mechanism == "pad the tile"
    assert c.techniques == ["technique-a", "technique-b"]
    assert c.author.kind == "agent" and c.author.name == "opus" and str(c.author) == "agent:opus"
    assert Candidate.model_validate({"id": "c", "task": "t", "author": "ana"}).author.kind is None
    with pytest.raises(ValidationError):
        Candidate.model_validate({"id": "c", "task": "t", "correctness": {"passed": "perhaps"}})


def test_get_by_bare_id_or_task_id(tmp_path):
    led = Ledger(tmp_path)
    led.append(Candidate(id="c1", task="a"))
    led.append(Candidate(id="c1", task="b"))
    read = led.read()
    assert read.get("b/c1").task == "b"
    with pytest.raises(BadRequest):
        read.get("c1")
    with pytest.raises(NotFound):
        read.get("zz")


def test_append_stamps_times_and_mirrors_benchmarks(tmp_path):
    led = Ledger(tmp_path)
    c = led.append(Candidate(id="c1", task="t", benchmarks=[{"shape": "1x1", "gpu": "H100", "value": 2, "baseline": 1}]))
    assert c.created_at and c.updated_at
    rows = (tmp_path / "benchmark.csv").read_text().splitlines()
    assert rows[0].startswith("candidate_id,task,shape") and rows[1].startswith("c1,t,1x1")
    assert led.read().get("c1").benchmarks[0].speedup == 2.0


def test_missing_workspace_reads_empty(tmp_path):
    read = Ledger(tmp_path / "none").read()
    assert read.candidates == [] and read.problems == []


def test_a_metric_without_a_finite_value_cannot_corrupt_the_line(tmp_path):
    led = Ledger(tmp_path)
    led.append(Candidate(id="n", task="t", evidence={"metrics": {"ok": 1.0, "bad": float("nan"), "inf": float("inf")}}))
    read = led.read()
    assert read.problems == [] and read.get("n").evidence.metrics == {"ok": 1.0}


def test_ledger_pages_reports_a_folder_that_is_not_a_workspace(tmp_path):
    from kwiki.ledger import ledger_pages

    pages, problems = ledger_pages([tmp_path, LEDGER])
    assert len(pages) == 36 and problems[0].reason.startswith("no such file")
    assert problems[1].line == 21 and problems[1].file.endswith("candidates.jsonl")
