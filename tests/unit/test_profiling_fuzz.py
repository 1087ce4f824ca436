"""Hypothesis fuzzing: no exception other than BadInput escapes the parsers, route() or diagnose_*."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwiki.errors import BadInput
from kwiki.profiling.diagnose import diagnose_bytes, diagnose_metrics, diagnose_text
from kwiki.profiling.ncu_csv import parse_bytes
from kwiki.profiling.routing import route

SYN = Path(__file__).resolve().parents[1] / "data" / "ncu_synthetic"
SEEDS = [p.read_bytes() for p in sorted(SYN.glob("*.csv")) if p.stat().st_size]
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

cells = st.one_of(st.text(max_size=12), st.sampled_from(["1,234.5", "n/a", "nan", "", "%", "42", "-1e309", "(1, 2, 3)", "\x00"]))
names = st.sampled_from(["ID", "Kernel Name", "launch__grid_size", "gpu__time_duration.sum", "Metric Name", "Metric Value",
                         "Section Name", "Rule Name", "Rule Description", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                         "smsp__pcsamp_warps_issue_stalled_barrier", "x__y", "Estimated Speedup", "Metric Unit"])


def _quote(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


@st.composite
def csv_like(draw) -> bytes:
    header = draw(st.lists(names, min_size=1, max_size=10))
    rows = draw(st.lists(st.lists(cells, max_size=12), max_size=5))
    lines = [",".join(_quote(h) for h in header)] + [",".join(_quote(c) for c in r) for r in rows]
    return "\n".join(lines).encode("utf-8", errors="replace")


def _safe(fn, *args) -> None:
    try:
        fn(*args)
    except BadInput:
        pass


@FAST
@given(st.binary(max_size=2000))
def test_parse_random_bytes(data):
    _safe(parse_bytes, data, "x.csv")


@FAST
@given(csv_like())
def test_parse_csv_like(data):
    _safe(parse_bytes, data, "x.csv")
    _safe(diagnose_bytes, data, "x.csv")


@FAST
@given(st.sampled_from(SEEDS), st.integers(min_value=0, max_value=3000), st.binary(max_size=20))
def test_parse_mutated_real_files(seed, cut, junk):
    cut = cut % (len(seed) + 1)
    _safe(diagnose_bytes, seed[:cut] + junk + seed[cut:], "x.csv")
    _safe(diagnose_bytes, seed[:cut], "x.csv")


@FAST
@given(st.dictionaries(st.one_of(names, st.text(max_size=20)), st.one_of(st.floats(allow_nan=True), st.text(max_size=10),
                                                                          st.integers(), st.none(), st.booleans()), max_size=12))
def test_diagnose_metrics_dicts(metrics):
    _safe(diagnose_metrics, metrics)


@FAST
@given(st.text(max_size=600))
def test_route_and_text(text):
    out = route(text)
    assert isinstance(out, list)
    for d in out:
        assert 0 <= d["confidence"] <= 1
    _safe(diagnose_text, text)


def test_pathological_inputs_are_fast():
    import time

    started = time.perf_counter()
    for text in ("a " * 100_000, "x" * 200_000 + "  1", "stall " * 30_000, ("DRAM Throughput" + " " * 50) * 3000,
                 "smsp__" * 30_000, "\n".join(["global loads"] * 20_000)):
        _safe(diagnose_text, text)
        _safe(diagnose_bytes, text.encode(), "x.csv")
    assert time.perf_counter() - started < 10
