"""diagnose_* responses: profiling alone, no index (pages are attached by the service: tests/service/test_diagnosis.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kwiki.errors import BadInput
from kwiki.profiling.diagnose import diagnose_bytes, diagnose_metrics, diagnose_text

SYN = Path(__file__).resolve().parents[1] / "data" / "ncu_synthetic"


def test_diagnose_bytes_multi_launch():
    r = diagnose_bytes((SYN / "raw_multi.csv").read_bytes(), "raw_multi.csv")
    assert r.format == "raw" and len(r.launches) == 3
    # three 2.4 us launches in one export
    assert all(d.top == "launch-overhead" for d in r.launches)
    assert r.launches[0].stall_shares["long_scoreboard"] > 0.5
    assert r.took_ms >= 0


def test_diagnose_details_uses_rule_message():
    r = diagnose_bytes((SYN / "details.csv").read_bytes(), "details.csv")
    assert r.launches[0].top == "tail-effect"


def test_diagnose_plain_uses_messages():
    r = diagnose_bytes((SYN / "plain.csv").read_bytes(), "plain.csv")
    assert r.launches[0].top == "smem-bank-conflicts"


def test_diagnose_text_console_output():
    text = """  DRAM Throughput                 %        92.51
  Duration                       us       135.17
  Compute (SM) Throughput         %        15.10
smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio 4.0

On average, only 4.0 of the 32 bytes transmitted per sector are utilized by each thread."""
    r = diagnose_text(text)
    assert r.launches[0].top == "uncoalesced-global"
    assert r.launches[0].key_metrics["duration"] == pytest.approx(135170.0)
    assert r.text_signals and r.text_signals[0]["signal"] == "uncoalesced-global"
    assert diagnose_text("how do I use TMA multicast").launches == []


def test_bad_arguments():
    with pytest.raises(BadInput):
        diagnose_metrics({"nothing": 1})
    with pytest.raises(BadInput):
        diagnose_metrics([1, 2])  # type: ignore[arg-type]
    with pytest.raises(BadInput):
        diagnose_bytes(b"", "x.csv")
    with pytest.raises(BadInput):
        diagnose_bytes(b"x" * 100, "x.csv", max_bytes=10)


def test_text_pairs_on_separate_lines_are_both_read():
    from kwiki.profiling.diagnose import diagnose_text

    resp = diagnose_text("launch__grid_size = 32\nlaunch__sm_count = 132")
    assert resp.launches and resp.launches[0].top == "small-grid"
