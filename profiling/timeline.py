"""Timelines from PM sampling: activity over a kernel's run, its tail and its idle stretches.

Reads the raw page exported with instances (``ncu --import R.ncu-rep --page raw --csv
--print-metric-instances values``) of a report captured with ``--section PmSampling --section
PmSampling_WarpStates`` (both are in ``--set full``). Each sampled metric is a cell ``aggregate (v1; v2;
...)``: one value per interval (``profiler__pmsampler_interval_time``, 1.5 us on the H200 fixtures). The
``PmSampling`` series are named ``<unit>.TriageCompute.<metric>``, the warp-state ones ``pmsampling:<metric>``;
each pass group samples from its own start, so every series is cut to its own active window.

    >>> spark([0, 1, 2, 3, 4, 5, 6, 7], width=8)
    '▁▂▃▄▅▆▇█'
"""

from __future__ import annotations

import csv
import itertools
import statistics
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from .inputs import parse_number
from .ncu_csv import MAX_LAUNCHES, find_header
from .rulebase import Evidence

if TYPE_CHECKING:
    from .diagnose import LaunchDiagnosis

ACTIVITY = ("TPC.TriageCompute.sm__cycles_active.avg", "TPC.TriageCompute.sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed")
SHOWN = ("TPC.TriageCompute.sm__cycles_active.avg", "TPC.TriageCompute.sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
         "FBSP.TriageCompute.dramc__throughput.avg.pct_of_peak_sustained_elapsed", "LTS.TriageCompute.lts__throughput.avg.pct_of_peak_sustained_elapsed",
         "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
         "pmsampling:smsp__warps_issue_stalled_long_scoreboard.avg", "pmsampling:smsp__warps_issue_stalled_barrier.avg",
         "pmsampling:smsp__warps_issue_stalled_wait.avg")
MAX_POINTS = 240        # series in the JSON are averaged down to this many points
PEAK_PERCENTILE = 0.9   # the activity's "peak" is its 90th percentile: one spike does not set the bar
LOW_FRACTION = 0.5      # a sample under half the peak counts as idle (half the SMs, or all at half rate)
TAIL_MIN_SHARE = 0.1    # a trailing idle stretch over 10% of the run is a tail worth naming (tail-effect's min_magnitude is 5%)
MIN_SAMPLES = 20        # fewer samples than this cannot show a tail: the kernel ran under ~30 us at 1.5 us per sample
SPARK = "▁▂▃▄▅▆▇█"


class Series(BaseModel):
    metric: str
    unit: str = ""
    values: list[float] = Field(default_factory=list)
    step_us: float  # time between two points of ``values``


class Timeline(BaseModel):
    launch_id: str
    kernel: str = ""
    interval_us: float
    samples: int  # samples of the activity series inside the kernel's run
    activity: str
    tail_share: float = 0.0  # share of the run at the end spent under half the peak activity
    idle_share: float = 0.0  # share of the whole run under half the peak activity
    evidence: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    sparkline: str = ""
    series: list[Series] = Field(default_factory=list)


def has_timeline(data: bytes) -> bool:
    head = data[:200_000]
    return b"pmsampling:" in head or b".TriageCompute." in head


def _values(cell: str) -> list[float] | None:
    if "(" not in cell or not cell.rstrip().endswith(")"):
        return None
    inner = cell[cell.index("(") + 1: cell.rindex(")")]
    out = [parse_number(x) for x in inner.split(";")]
    return [x if x is not None else 0.0 for x in out] if len(out) > 1 else None


def _window(v: list[float]) -> tuple[int, int] | None:
    nz = [i for i, x in enumerate(v) if x > 0]
    return (nz[0], nz[-1] + 1) if nz else None


def _down(v: list[float], n: int = MAX_POINTS) -> tuple[list[float], int]:
    if len(v) <= n:
        return [round(x, 4) for x in v], 1
    k = -(-len(v) // n)
    return [round(statistics.fmean(v[i: i + k]), 4) for i in range(0, len(v), k)], k


def spark(v: list[float], width: int = 60) -> str:
    """A one-line chart of ``v`` (averaged down to ``width`` characters), scaled to its maximum."""
    if not v:
        return ""
    k = max(1, -(-len(v) // width))
    pts = [statistics.fmean(v[i: i + k]) for i in range(0, len(v), k)]
    top = max(pts) or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, int(p / top * (len(SPARK) - 1) + 0.5))] for p in pts)


def _analyze(act: list[float], interval: float) -> tuple[float, float, list[str], list[str]]:
    warnings = []
    if len(act) < MIN_SAMPLES:
        warnings.append(f"{len(act)} PM samples at {interval:g} us: too few to show a tail (fewer than {MIN_SAMPLES}); "
                        "profile a longer launch or lower the interval (--pm-sampling-interval)")
    peak = sorted(act)[int(PEAK_PERCENTILE * (len(act) - 1))] if act else 0.0
    if peak <= 0:
        return 0.0, 0.0, [], warnings
    low = [x < LOW_FRACTION * peak for x in act]
    tail = 0
    for flag in reversed(low):
        if not flag:
            break
        tail += 1
    tail_share, idle_share = tail / len(act), sum(low) / len(act)
    ev = []
    if tail_share >= TAIL_MIN_SHARE:
        ev.append(f"SM activity stays under half its peak for the last {tail_share:.0%} of the run ({tail} of {len(act)} samples, "
                  f"{tail * interval:.0f} us): a tail - a partial last wave or a few long blocks")
    elif idle_share - tail_share >= TAIL_MIN_SHARE:
        ev.append(f"SM activity is under half its peak for {idle_share:.0%} of the run, in stretches before the end: "
                  "imbalance or phases that starve the SMs")
    else:
        ev.append(f"SM activity stays within half of its peak for {1 - idle_share:.0%} of the run: no tail "
                  f"(the last {tail_share:.0%} under half)")
    return round(tail_share, 4), round(idle_share, 4), ev, warnings


def parse_timelines(data: bytes) -> list[Timeline]:
    """One :class:`Timeline` per launch row of a raw page with metric instances that carries PM-sampling series."""
    text = data.decode("utf-8", "replace").lstrip("\ufeff")
    lines = find_header(text)  # read lazily, and only the launches a diagnosis reads (MAX_LAUNCHES rows)
    if lines is None:
        return []
    rows = (r for r in csv.reader(lines) if r)
    header, units = next(rows, None), next(rows, None)
    if header is None or units is None:
        return []
    cols = [i for i, h in enumerate(header) if h.startswith("pmsampling:") or ".TriageCompute." in h]
    out: list[Timeline] = []
    for row in itertools.islice(rows, MAX_LAUNCHES):
        rec = dict(zip(header, row))
        series: dict[str, list[float]] = {}
        for i in cols:
            if i < len(row) and (v := _values(row[i])) is not None:
                series[header[i]] = v
        unit_of = {header[i]: units[i] for i in cols if i < len(units)}
        t = build_timeline(series, parse_number(rec.get("profiler__pmsampler_interval_time", "")) or 0.0,
                           rec.get("ID", str(len(out))), rec.get("Kernel Name", ""), unit_of)
        if t is not None:
            out.append(t)
    return out


def build_timeline(series: dict[str, list[float]], interval: float, launch_id: str, kernel: str = "",
                   units: dict[str, str] | None = None) -> Timeline | None:
    """A :class:`Timeline` from ``{metric: one value per sample}`` sampled every ``interval`` us (None: nothing sampled)."""
    if not series or interval <= 0:
        return None
    name = next((a for a in ACTIVITY if a in series and _window(series[a])), None)
    name = name or max(series, key=lambda k: sum(1 for x in series[k] if x > 0))
    win = _window(series[name])
    act = series[name][win[0]: win[1]] if win else []
    tail, idle, ev, warns = _analyze(act, interval)
    shown = []
    for metric in [m for m in SHOWN if m in series]:
        w = _window(series[metric])
        if w is None:  # never active (no barrier in the kernel, no tensor pipe): nothing to draw
            continue
        vals, k = _down(series[metric][w[0]: w[1]])
        shown.append(Series(metric=metric, unit=(units or {}).get(metric, ""), values=vals, step_us=round(k * interval, 4)))
    return Timeline(launch_id=launch_id, kernel=kernel, interval_us=interval, samples=len(act), activity=name, tail_share=tail,
                    idle_share=idle, evidence=ev, warnings=warns, sparkline=spark(act), series=shown)


TIMELINE_SIGNALS = ("tail-effect", "load-imbalance", "small-grid")


def attach_timelines(launches: list[LaunchDiagnosis], data: bytes, max_bytes: int) -> None:
    """Give each diagnosed launch its timeline (matched by launch ID) and add what the timeline shows to the
    signals it bears on (tail-effect, load-imbalance, small-grid) as evidence."""
    from .hotspots import _plain

    plain = _plain(data, max_bytes)
    if not has_timeline(plain):
        return
    apply_timelines(launches, {t.launch_id: t for t in parse_timelines(plain)})


def apply_timelines(launches: list[LaunchDiagnosis], by_id: dict[str, Timeline]) -> None:
    """Set each launch's timeline from ``{launch id: timeline}`` and add its evidence to the signals it bears on."""
    for d in launches:
        t = by_id.get(d.launch_id)
        if t is None:
            continue
        d.timeline = t
        if d.next_step is not None and "--print-metric-instances" in d.next_step.export:
            from .next_step import next_step

            d.next_step = next_step(d.next_step.signal if d.next_step.signal != "missing-counters" else None, d.kernel or d.name,
                                    have=frozenset({"timeline"}))
        for sig in d.signals:
            if sig.signal in TIMELINE_SIGNALS:
                sig.evidence.append(Evidence(metric=f"PM sampling ({t.activity}, {t.samples} samples)", value=t.tail_share,
                                             threshold=TAIL_MIN_SHARE, note=t.evidence[0] if t.evidence else ""))
