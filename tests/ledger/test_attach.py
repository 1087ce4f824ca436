"""`kwiki diagnose --record`: a real diagnosis of a real NCU export attached to a candidate."""

from __future__ import annotations

import pytest

from kwiki.errors import NotFound
from kwiki.ledger import Ledger, attach_diagnosis
from kwiki.profiling.diagnose import diagnose_bytes
from tests.conftest import DATA


def _diagnose(name: str):
    path = DATA / "ncu" / name
    return diagnose_bytes(path.read_bytes(), name)


def test_attach_records_signals_metrics_and_reports(workspace):
    led = Ledger(workspace)
    before = led.get("transpose/t01")
    diag = _diagnose("bank_conflicts-bad.raw.csv")
    fired = [s.signal for s in diag.launches[0].signals]
    assert fired, "the fixture should fire at least one signal"

    cand = attach_diagnosis(led, "transpose/t01", diag.model_dump(), report_path="reports/t01-bad.ncu-rep")
    assert cand.evidence.signals[0] == "smem-bank-conflicts" == fired[0]
    assert set(fired) <= set(cand.evidence.signals)
    assert cand.evidence.metrics["achieved_occupancy"] == diag.launches[0].key_metrics["achieved_occupancy"]
    # what was there before is kept: the earlier report and metric
    assert cand.evidence.reports == ["reports/t01.ncu-rep", "bank_conflicts-bad.raw.csv", "reports/t01-bad.ncu-rep"]
    assert "l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ld" in cand.evidence.metrics
    assert cand.evidence.diagnosed_at and cand.evidence.model_extra["magnitudes"]["smem-bank-conflicts"] > 0

    read = led.read()
    assert read.get("transpose/t01").evidence == cand.evidence
    assert read.get("transpose/t01").status == "promoted" and len(read.candidates) == 36
    versions = led.versions("transpose/t01")
    assert len(versions) == 2 and versions[0].evidence == before.evidence  # a new version; the old one is kept
    assert cand.benchmarks == before.benchmarks  # no duplicate benchmark figures


def test_attach_accepts_the_response_model_and_a_second_diagnosis(workspace):
    led = Ledger(workspace)
    attach_diagnosis(led, "t03", _diagnose("bank_conflicts-fixed.raw.csv"))
    cand = attach_diagnosis(led, "t03", _diagnose("bank_conflicts-fixed.details.csv"))
    assert "dram-bound" in cand.evidence.signals
    assert cand.evidence.reports[-2:] == ["bank_conflicts-fixed.raw.csv", "bank_conflicts-fixed.details.csv"]
    assert len(cand.evidence.signals) == len(set(cand.evidence.signals))


def test_attach_to_an_unknown_candidate_is_not_found(workspace):
    with pytest.raises(NotFound):
        attach_diagnosis(Ledger(workspace), "transpose/zz", {"launches": []})


def test_kwiki_diagnose_record_attaches_to_the_candidate(workspace, tmp_path):
    from typer.testing import CliRunner

    from kwiki.service.cli import app

    export = DATA / "ncu" / "bank_conflicts-bad.raw.csv"
    result = CliRunner().invoke(app, ["diagnose", str(export), "--record", "transpose/t04", "--workspace", str(workspace),
                                      "--index-dir", str(tmp_path / "no-index"), "--json"])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    assert "recorded on transpose/t04" in result.stderr
    t04 = Ledger(workspace).read().get("transpose/t04")
    assert t04.evidence.signals[0] == "smem-bank-conflicts" and "bank_conflicts-bad.raw.csv" in t04.evidence.reports
    bad = CliRunner().invoke(app, ["diagnose", str(export), "--record", "nope", "--workspace", str(workspace),
                                   "--index-dir", str(tmp_path / "no-index")])
    assert bad.exit_code == 2 and "no candidate" in bad.stderr
