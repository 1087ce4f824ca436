"""The candidate record and the ledger's storage, the same tests on both backends (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kwiki.errors import BadRequest, NotFound
from kwiki.ledger import Candidate, Ledger, import_dir

from .conftest import LEDGER


def test_fixture_imports_every_good_line(fixture_ledger):
    read = fixture_ledger.read()
    assert len(read.candidates) == 36
    assert {c.task for c in read.candidates} == {"transpose", "gemm-bf16"}
    assert fixture_ledger.get("gemm-bf16/g18").parent == "gx9"  # the lines after the malformed one are read too


def test_newest_version_of_a_candidate_wins_and_keeps_its_place(fixture_ledger):
    t15 = fixture_ledger.get("transpose/t15")
    assert t15.status == "promoted" and "L2" in t15.reason
    keys = [c.key for c in fixture_ledger.read().candidates]
    assert keys.index("transpose/t15") < keys.index("transpose/t16")


def test_unknown_fields_are_kept_through_an_append(make_ledger):
    t16 = Ledger(LEDGER).get("t16")
    assert t16.model_extra == {"reviewer": "ana"}
    led = make_ledger()
    led.append(t16.model_copy(update={"status": "rejected"}))
    again = led.get("t16")
    assert again.model_extra == {"reviewer": "ana"} and again.status == "rejected"


def test_benchmark_rows_are_merged_into_their_candidates(fixture_ledger):
    shapes = {(b.shape, b.gpu) for b in fixture_ledger.get("transpose/t11").benchmarks}
    assert shapes == {("8192x8192", "H100"), ("4096x4096", "H100")}
    # a row without a task column finds the one candidate with that id
    assert ("8192x8192", "B200") in {(b.shape, b.gpu) for b in fixture_ledger.get("t07").benchmarks}


def test_candidate_fields_are_normalized():
    c = Candidate.model_validate({"id": "c1", "task": "t", "parent": "", "mechanism": "pad\n the   tile",
                                  "techniques": "technique-a, technique-b", "author": "agent:opus"})
    assert c.parent is None and c.mechanism == "pad the tile"
    assert c.techniques == ["technique-a", "technique-b"]
    assert c.author.kind == "agent" and c.author.name == "opus" and str(c.author) == "agent:opus"
    assert Candidate.model_validate({"id": "c", "task": "t", "author": "ana"}).author.kind is None
    with pytest.raises(ValidationError):
        Candidate.model_validate({"id": "c", "task": "t", "correctness": {"passed": "perhaps"}})


def test_get_by_bare_id_or_task_id_and_nearest_ids_as_hint(make_ledger):
    led = make_ledger()
    led.append(Candidate(id="c1", task="a"))
    led.append(Candidate(id="c1", task="b"))
    led.append(Candidate(id="swizzle64", task="b"))
    assert led.get("b/c1").task == "b"
    with pytest.raises(BadRequest, match="several tasks"):
        led.get("c1")
    with pytest.raises(NotFound) as exc:
        led.get("b/swizle64")
    assert exc.value.hint.startswith("nearest: b/swizzle64")


def test_append_stamps_times_and_keeps_created_at_across_versions(make_ledger):
    led = make_ledger()
    c = led.append(Candidate(id="c1", task="t", benchmarks=[{"shape": "1x1", "gpu": "H100", "value": 2, "baseline": 1}]))
    assert c.created_at and c.updated_at
    again = led.append(Candidate(id="c1", task="t", status="rejected", reason="slower"))
    assert again.created_at == c.created_at
    assert [v.status for v in led.versions("t/c1")] == ["candidate", "rejected"]
    assert led.versions("t/c1")[0].benchmarks[0].speedup == 2.0
    assert led.read().lines == 2  # one row per version written


def test_missing_workspace_reads_empty_and_creates_nothing(tmp_path):
    led = Ledger(tmp_path / "none")
    read = led.read()
    assert read.candidates == [] and read.problems == [] and led.count() == 0
    assert not (tmp_path / "none").exists()


def test_a_metric_without_a_finite_value_is_dropped(make_ledger):
    led = make_ledger()
    led.append(Candidate(id="n", task="t", evidence={"metrics": {"ok": 1.0, "bad": float("nan"), "inf": float("inf")}}))
    assert led.get("n").evidence.metrics == {"ok": 1.0}


def test_an_oversized_record_is_refused_and_nothing_is_written(make_ledger):
    led = make_ledger()
    with pytest.raises(BadRequest, match="bytes, over"):
        led.append(Candidate(id="big", task="t", notes="x" * 300_000))
    assert led.count() == 0


def test_append_many_is_all_or_nothing(make_ledger):
    led = make_ledger()
    led.append(Candidate(id="a", task="t"))
    with pytest.raises(BadRequest):
        led.append_many([Candidate(id="b", task="t"), Candidate(id="big", task="t", notes="x" * 300_000)])
    assert led.keys() == ["t/a"]


def test_filters_are_sql(fixture_ledger):
    rejected = fixture_ledger.read(task="transpose", status="rejected").candidates
    assert {c.id for c in rejected} == {"t02", "t04", "t05", "t06", "t08", "t09", "t10", "t13", "t14", "t16"}
    assert {c.kernel for c in fixture_ledger.read(kernel="gemm_wgmma").candidates} == {"gemm_wgmma"}
    with pytest.raises(BadRequest):
        fixture_ledger.read(status="bogus")


def test_ledger_pages_reports_a_folder_that_is_not_a_workspace(tmp_path):
    from kwiki.ledger import ledger_pages

    pages, problems = ledger_pages([tmp_path, LEDGER])
    assert len(pages) == 36 and problems[0].reason.startswith("no candidates")
    assert problems[1].line == 21 and problems[1].file.endswith("candidates.jsonl")


def test_import_into_each_backend_then_again_adds_nothing(make_ledger):
    led = make_ledger()
    first = import_dir(led, LEDGER)
    assert len(first["added"]) == 36 and first["problems"][0]["line"] == 21
    again = import_dir(led, LEDGER)
    assert again["added"] == [] and len(again["unchanged"]) == 36
    original = Ledger(LEDGER)
    assert [c.key for c in led.read().candidates] == [c.key for c in original.read().candidates]
    assert led.get("t11").benchmarks == original.get("t11").benchmarks
