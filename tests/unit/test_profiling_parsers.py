"""Parsers of ncu exports (profiling/ncu_csv.py, profiling/inputs.py) on small synthetic files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kwiki.errors import BadInput
from kwiki.profiling.inputs import parse_number, unit_factor
from kwiki.profiling.ncu_csv import parse_bytes, parse_metrics_dict

SYN = Path(__file__).resolve().parents[1] / "data" / "ncu_synthetic"


def load(name: str):
    return parse_bytes((SYN / name).read_bytes(), name)


@pytest.mark.parametrize("text,expected", [
    ("1,234.5", 1234.5), ("65,536", 65536.0), ("92.51", 92.51), ("45%", 45.0), ("1.2e+04", 12000.0), ("0", 0.0),
    ("-3", -3.0), (" 7 ", 7.0), ("n/a", None), ("N/A", None), ("", None), ("no data", None), ("nan", None), ("inf", None),
    ("(256, 1, 1)", None), ("PolicySpread", None), ("1,2,3", None), ("12,34", None), (None, None), (True, None), (3, 3.0),
])
def test_parse_number(text, expected):
    assert parse_number(text) == expected


@pytest.mark.parametrize("unit,factor", [
    ("usecond", 1e3), ("us", 1e3), ("msecond", 1e6), ("nsecond", 1.0), ("second", 1e9), ("Kbyte", 1e3), ("Mbyte", 1e6),
    ("byte", 1.0), ("Gbyte/s", 1e9), ("Tbyte/s", 1e12), ("byte/second", 1.0), ("Kbyte/block", 1e3), ("Ghz", 1e9), ("hz", 1.0),
    ("%", 1.0), ("", 1.0), (None, 1.0), ("register/thread", 1.0), ("inst/cycle", 1.0), ("byte/usecond", 1e6),
])
def test_unit_factor(unit, factor):
    assert unit_factor(unit) == pytest.approx(factor)


def test_raw_single_launch_normalizes_units():
    res = load("raw_single.csv")
    assert res.format == "raw" and len(res.profiles) == 1
    p = res.profiles[0]
    assert p.kernel == "small_kernel(float*)" and p.launch_id == "0"
    assert p.metrics["duration"] == pytest.approx(1_234_500.0)  # usecond -> ns, thousands separator
    assert p.metrics["dram_bytes_read"] == pytest.approx(2_048_000.0)  # Kbyte -> bytes
    assert p.metrics["sm_throughput_pct"] == 12.5  # the .avg column, not the .max one next to it
    assert "dram_throughput_pct" not in p.metrics  # n/a dropped
    assert "totally__unknown_metric.sum" in p.unknown  # kept for the response, not an error


def test_raw_multi_kernel_one_profile_per_launch():
    res = load("raw_multi.csv")
    assert [(p.kernel, p.launch_id) for p in res.profiles] == [("scale(float*)", "0"), ("shift(float*)", "1"), ("scale(float*)", "2")]
    assert res.profiles[2].metrics["grid_size"] == 1024.0
    assert all(p.metrics["duration"] == 2400.0 for p in res.profiles)
    assert res.profiles[0].name == "scale(float*) (launch 0)"


def test_details_page_metrics_and_rules():
    res = load("details.csv")
    assert res.format == "details"
    p = res.profiles[0]
    assert p.metrics["duration"] == pytest.approx(249_820.0)
    assert p.metrics["memory_throughput_pct"] == 4.2  # SOL "Memory Throughput" is a percent
    assert p.metrics["dram_bytes_per_second"] == pytest.approx(202.32e9)  # MWA "Memory Throughput" is bytes/s
    assert p.metrics["smem_config_size"] == pytest.approx(32_770.0)
    assert p.metrics["occ_limit_warps"] == 2.0
    assert len(p.rules) == 1 and p.rules[0].name == "LaunchConfiguration" and p.rules[0].speedup == 50.0


def test_plain_csv_skips_prof_lines():
    res = load("plain.csv")
    assert res.format == "details"
    p = res.profiles[0]
    assert p.kernel == "bank_kernel(float*)"
    assert p.metrics["duration"] == 84928.0
    assert p.metrics["dram_bytes_per_second"] == pytest.approx(1_345_691_032_403.92)
    assert {r.name for r in p.rules} == {"SharedMemoryConflicts", "CPIStall"}


@pytest.mark.parametrize("name,words", [
    ("empty.csv", "empty"), ("truncated.csv", "truncated"), ("header_only.csv", "no launch rows"),
    ("not_ncu.csv", "not an Nsight Compute"), ("id_no_metrics.csv", "no Nsight Compute metric"),
])
def test_bad_inputs_raise_bad_input(name, words):
    with pytest.raises(BadInput) as exc:
        load(name)
    assert words.lower() in exc.value.message.lower()


def test_binary_and_report_inputs():
    with pytest.raises(BadInput, match="ncu_report"):
        parse_bytes(b"NVR\x00\x02\x00 binary report", "upload.bin")
    with pytest.raises(BadInput, match="ncu_report"):
        parse_bytes(b"anything", "x.ncu-rep")
    with pytest.raises(BadInput, match="binary"):
        parse_bytes(b"\x00\x01garbage", "x.csv")
    with pytest.raises(BadInput) as exc:
        parse_bytes(b"\x00\x01\x02\x03" * 100, "blob.bin")
    assert exc.value.hint and "--page raw --csv" in exc.value.hint
    with pytest.raises(BadInput, match="gzip"):
        parse_bytes(b"\x1f\x8b\x08\x00garbage", "x.csv.gz")
    with pytest.raises(BadInput, match="limit"):
        parse_bytes(b"x" * 2000, "x.csv", max_bytes=1000)


def test_gzipped_csv_is_read():
    data = gzip.compress((SYN / "raw_multi.csv").read_bytes())
    assert len(parse_bytes(data, "raw_multi.csv.gz").profiles) == 3


def test_json_metrics():
    res = load("metrics.json")
    assert res.format == "json"
    p = res.profiles[0]
    assert p.kernel == "k"
    assert p.metrics == {"grid_size": 32.0, "registers_per_thread": 64.0, "sm_throughput_pct": 45.3, "duration": 3000.0}
    assert p.unknown == ["no_such_metric"]
    flat = parse_metrics_dict({"launch__grid_size": 8, "sm__throughput": 10, "bogus": "x", "Achieved Occupancy": True})
    assert flat.metrics == {"grid_size": 8.0, "sm_throughput_pct": 10.0}
    many = parse_bytes(json.dumps([{"launch__grid_size": 1}, {"launch__grid_size": 2}]).encode(), "m.json")
    assert [p.metrics["grid_size"] for p in many.profiles] == [1.0, 2.0]
    for bad in (b"{not json", b"[1, 2, 3]", b'"string"'):
        with pytest.raises(BadInput):
            parse_bytes(bad, "m.json")


REAL = Path(__file__).resolve().parents[1] / "data" / "ncu"


@pytest.mark.skipif(not (REAL / "coalescing-bad.raw.csv").exists(), reason="real ncu exports not present")
def test_real_raw_and_details_agree():
    raw = parse_bytes((REAL / "coalescing-bad.raw.csv").read_bytes(), "raw.csv").profiles[0].metrics
    det = parse_bytes((REAL / "coalescing-bad.details.csv").read_bytes(), "details.csv").profiles[0].metrics
    for key in ("duration", "grid_size", "dram_throughput_pct", "achieved_occupancy", "registers_per_thread", "sm_count"):
        assert det[key] == pytest.approx(raw[key], rel=0.01), key
    assert len(raw) > 150


class _Metric:
    def __init__(self, v):
        self.v = v

    def as_double(self):
        if isinstance(self.v, str):
            raise TypeError("string metric")
        return self.v


class _Action:
    NameBase_DEMANGLED = 1
    values = {"gpu__time_duration.sum": 249824.0, "launch__grid_size": 265.0, "launch__sm_count": 132.0,
              "launch__occupancy_limit_warps": 2.0, "launch__occupancy_limit_registers": 4.0, "launch__kernel_name": "x",
              "something__unknown.sum": 1.0}

    def name(self, base=None):
        return "tail_effect_bad(const float *, float *)" if base else "tail_effect_bad"

    def metric_names(self):
        return tuple(self.values)

    def metric_by_name(self, n):
        return _Metric(self.values[n])

    def rule_results_as_dicts(self):
        return [{"rule_identifier": "LaunchConfiguration", "section_identifier": "LaunchStats",
                 "rule_message": {"title": "Tail Effect", "type": 2, "message": "This kernel launch results in 1 full waves and a partial wave of 1 thread blocks."},
                 "speedup_estimation": {"type": 2, "speedup": 50.0}}]


class _Range:
    def num_actions(self):
        return 1

    def action_by_idx(self, i):
        return _Action()


class _Ctx:
    def num_ranges(self):
        return 1

    def range_by_idx(self, i):
        return _Range()


def test_ncu_rep_through_ncu_report(monkeypatch):
    """The ncu_report calls as verified on Nsight Compute 2025.3.1, with a stand-in module."""
    import sys
    import types

    fake = types.ModuleType("ncu_report")
    fake.load_report = lambda path: _Ctx()  # type: ignore[attr-defined]
    fake.IAction = _Action  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ncu_report", fake)
    res = parse_bytes(b"NVR\x00\x02 rest of a report", "t.ncu-rep")
    assert res.format == "ncu-rep"
    p = res.profiles[0]
    assert p.kernel == "tail_effect_bad(const float *, float *)"
    assert p.metrics["duration"] == 249824.0 and p.metrics["occ_limit_warps"] == 2.0
    assert p.rules[0].name == "LaunchConfiguration" and p.rules[0].speedup == 50.0 and p.rules[0].speedup_type == "global"
    from kwiki.profiling.diagnose import diagnose_bytes
    assert diagnose_bytes(b"NVR\x00\x02 rest", "t.ncu-rep").launches[0].top == "tail-effect"
