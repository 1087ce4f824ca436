"""`kwiki diagnose AFTER --baseline BEFORE --candidate ID`: the comparison attached in the ledger's schema."""

from __future__ import annotations

import gzip
from pathlib import Path

from kwiki.ledger import Ledger
from kwiki.profiling.compare import compare_bytes
from kwiki.service.diagnosis import attach_comparison

VERIFY = Path(__file__).resolve().parents[2] / "profiling" / "fixtures" / "verify"


def test_comparison_is_the_candidates_evidence(workspace):
    led = Ledger(workspace)
    rd = lambda n: gzip.decompress((VERIFY / n).read_bytes())  # noqa: E731
    c = compare_bytes(rd("bank_conflicts-bad.raw.csv.gz"), "bank_conflicts-bad.raw.csv", rd("bank_conflicts-fixed.raw.csv.gz"),
                      "bank_conflicts-fixed.raw.csv")
    cand = attach_comparison(led, "transpose/t01", c)
    comp = cand.evidence.model_extra["comparison"]
    assert comp["verdict"] == "improved" and comp["baseline"] == "bank_conflicts-bad.raw.csv" and comp["speedup"] > 2
    assert comp["kernels"][0]["resolved"][0] == "smem-bank-conflicts"
    assert "bank_conflicts-fixed.raw.csv" in cand.evidence.reports and "bank_conflicts-bad.raw.csv" in cand.evidence.reports
    assert led.read().get("transpose/t01").evidence.model_extra["comparison"] == comp
