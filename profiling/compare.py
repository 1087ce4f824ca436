"""Compare a candidate's Nsight Compute export with its parent's: matched kernels, duration ratio with a
verdict, key metric deltas, and the signals resolved, appeared and persisting.

    kwiki diagnose AFTER.raw.csv --baseline BEFORE.raw.csv [--json]

Kernels are matched by name, then (when each side has one kernel left) the remaining pair, then by launch
order among kernels of the same grid and block, then by launch order. :data:`VERDICT_RULE` is the rule
that turns two sets of durations into improved / regressed / within noise; it is returned with every
comparison.
"""

from __future__ import annotations

import statistics
from typing import Literal, Sequence

from pydantic import BaseModel, Field

from kwiki.errors import BadInput

from .diagnose import DiagnoseResponse, LaunchDiagnosis, diagnose_parsed
from .ncu_csv import MAX_BYTES, MAX_LAUNCHES, LaunchProfile, ParseResult, parse_bytes
from .program import select_kernel
from .timeline import attach_timelines

# Noise: ncu replays each launch serialized, caches flushed, clocks as found. On the H200 fixtures one kernel's
# launches in one export spread 0.7-0.9% (coalescing, 3 launches each) and the same kernel in two captures a day
# apart differed by 0.1-1.0% (tail_effect-bad 249.8 / 249.6 us, coalescing-bad 135.2 / 136.6 us).
NOISE_FLOOR = 0.02          # never call a change under 2% real, however tight the launches
SPREAD_FACTOR = 2.0         # with >= 2 launches a side: the band is twice the larger relative spread (max-min)/median
SINGLE_LAUNCH_NOISE = 0.05  # one launch a side: no spread to measure, so 5% (five times the spread seen above)
SIGNAL_PRESENT = 0.1        # a signal below this magnitude is not a problem worth tracking across versions
CLOCK_MISMATCH = 0.05       # SM clocks 5% apart make durations incomparable (ncu --clock-control differs, or throttling)
VERDICT_RULE = (
    "speedup = median duration before / median duration after, over each matched kernel's launches; the noise band is "
    f"max({NOISE_FLOOR:g}, {SPREAD_FACTOR:g} x the larger (max-min)/median of the two sides) when both sides have at least "
    f"2 launches, else {SINGLE_LAUNCH_NOISE:g}; improved when speedup >= 1 + band, regressed when speedup <= 1 / (1 + band), "
    "else within noise. The export's verdict applies the same rule to the summed median durations of the matched kernels, "
    "with the largest band among them.")

# (label, canonical metric ids summed; a pair of tuples is a ratio numerator / denominator)
DELTAS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("duration (ns)", ("duration",), ()),
    ("SM throughput %", ("sm_throughput_pct",), ()),
    ("memory throughput %", ("memory_throughput_pct",), ()),
    ("DRAM throughput %", ("dram_throughput_pct",), ()),
    ("L2 throughput %", ("l2_throughput_pct",), ()),
    ("issue active %", ("issue_active_pct",), ()),
    ("achieved occupancy %", ("achieved_occupancy",), ()),
    ("theoretical occupancy %", ("theoretical_occupancy",), ()),
    ("registers per thread", ("registers_per_thread",), ()),
    ("global load sectors per request", ("global_ld_sectors",), ("global_ld_requests",)),
    ("global store sectors per request", ("global_st_sectors",), ("global_st_requests",)),
    ("shared-memory bank conflicts", ("smem_conflicts_ld", "smem_conflicts_st"), ()),
    ("local-memory sectors", ("local_ld_sectors", "local_st_sectors"), ()),
    ("instructions executed", ("inst_executed",), ()),
    ("threads per instruction", ("threads_per_inst",), ()),
)
TOP_STALLS = 4  # stall shares listed: the reasons largest on either side


class MetricDelta(BaseModel):
    metric: str
    before: float | None = None
    after: float | None = None
    ratio: float | None = None  # after / before


class SignalChange(BaseModel):
    signal: str
    before: float | None = None  # magnitude (max over the kernel's launches)
    after: float | None = None
    change: float | None = None  # after - before


class KernelComparison(BaseModel):
    before_kernel: str
    after_kernel: str
    matched_by: Literal["name", "only-kernel", "order-and-shape", "order"]
    before_launches: int
    after_launches: int
    before_ns: float
    after_ns: float
    speedup: float
    noise: float
    verdict: Literal["improved", "regressed", "within-noise"]
    before_top: str | None = None
    after_top: str | None = None
    resolved: list[SignalChange] = Field(default_factory=list)
    appeared: list[SignalChange] = Field(default_factory=list)
    persisting: list[SignalChange] = Field(default_factory=list)
    deltas: list[MetricDelta] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class Comparison(BaseModel):
    before: str
    after: str
    rule: str = VERDICT_RULE
    verdict: Literal["improved", "regressed", "within-noise", "no-match"]
    speedup: float | None = None
    kernels: list[KernelComparison] = Field(default_factory=list)
    unmatched_before: list[str] = Field(default_factory=list)
    unmatched_after: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    after_diagnosis: DiagnoseResponse | None = None


def noise_band(before: Sequence[float], after: Sequence[float]) -> float:
    """The relative change under which two sets of launch durations are the same (see :data:`VERDICT_RULE`)."""
    if len(before) < 2 or len(after) < 2:
        return SINGLE_LAUNCH_NOISE
    spread = max((max(x) - min(x)) / statistics.median(x) for x in (before, after) if statistics.median(x) > 0)
    return round(max(NOISE_FLOOR, SPREAD_FACTOR * spread), 4)


def judge_speedup(speedup: float, band: float) -> Literal["improved", "regressed", "within-noise"]:
    if speedup >= 1 + band:
        return "improved"
    if speedup <= 1 / (1 + band):
        return "regressed"
    return "within-noise"


class _Side:
    """One export: per kernel (in first-launch order) its launches' profiles and diagnoses."""

    def __init__(self, profiles: Sequence[LaunchProfile], diagnosis: DiagnoseResponse) -> None:
        self.diagnosis = diagnosis
        self.kernels: dict[str, list[tuple[LaunchProfile, LaunchDiagnosis]]] = {}
        for p, d in zip(profiles, diagnosis.launches):
            self.kernels.setdefault(p.kernel or p.name, []).append((p, d))

    def shape(self, kernel: str) -> tuple[str, str]:
        p = self.kernels[kernel][0][0]
        return (p.grid, p.block)


def _match(b: _Side, a: _Side) -> list[tuple[str, str, str]]:
    left, right = list(b.kernels), list(a.kernels)
    pairs: list[tuple[str, str, str]] = []
    for k in list(left):
        if k in right:
            pairs.append((k, k, "name"))
            left.remove(k)
            right.remove(k)
    if len(left) == 1 and len(right) == 1:
        return pairs + [(left[0], right[0], "only-kernel")]
    for k in list(left):
        same = next((r for r in right if a.shape(r) == b.shape(k) and all(b.shape(k))), None)
        if same is not None:
            pairs.append((k, same, "order-and-shape"))
            left.remove(k)
            right.remove(same)
    for k, r in zip(list(left), list(right)):
        pairs.append((k, r, "order"))
    return pairs


def _median_launch(rows: list[tuple[LaunchProfile, LaunchDiagnosis]]) -> LaunchProfile:
    med = statistics.median(p.metrics.get("duration", 0.0) for p, _ in rows)
    return min(rows, key=lambda r: abs(r[0].metrics.get("duration", 0.0) - med))[0]


def _value(m: dict[str, float], num: tuple[str, ...], den: tuple[str, ...]) -> float | None:
    if not all(k in m for k in num):
        return None
    top = sum(m[k] for k in num)
    if not den:
        return round(top, 4)
    bottom = sum(m.get(k, 0.0) for k in den)
    return round(top / bottom, 4) if bottom > 0 else None


def _deltas(pb: LaunchProfile, pa: LaunchProfile, db: LaunchDiagnosis, da: LaunchDiagnosis) -> list[MetricDelta]:
    out = []
    for label, num, den in DELTAS:
        vb, va = _value(pb.metrics, num, den), _value(pa.metrics, num, den)
        if vb is None and va is None:
            continue
        out.append(MetricDelta(metric=label, before=vb, after=va, ratio=float(f"{va / vb:.4g}") if vb and va is not None else None))
    reasons = sorted(set(db.stall_shares) | set(da.stall_shares), key=lambda r: -max(db.stall_shares.get(r, 0.0), da.stall_shares.get(r, 0.0)))
    for r in reasons[:TOP_STALLS]:
        vb, va = db.stall_shares.get(r), da.stall_shares.get(r)
        out.append(MetricDelta(metric=f"stall share {r}", before=vb, after=va, ratio=round(va / vb, 4) if vb and va is not None else None))
    return out


def _signals(rows: list[tuple[LaunchProfile, LaunchDiagnosis]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for _, d in rows:
        for s in d.signals:
            if s.signal != "speed-of-light" and not s.by_design and s.magnitude >= SIGNAL_PRESENT:
                out[s.signal] = max(out.get(s.signal, 0.0), s.magnitude)
    return out


def _compare_kernel(kb: str, ka: str, how: str, b: _Side, a: _Side) -> KernelComparison:
    rb, ra = b.kernels[kb], a.kernels[ka]
    durs_b = [p.metrics["duration"] for p, _ in rb if p.metrics.get("duration", 0.0) > 0]
    durs_a = [p.metrics["duration"] for p, _ in ra if p.metrics.get("duration", 0.0) > 0]
    if not durs_b or not durs_a:
        raise BadInput(f"no duration for {kb if not durs_b else ka}: cannot compare", hint="export with --page raw --csv (gpu__time_duration.sum)")
    mb, ma = statistics.median(durs_b), statistics.median(durs_a)
    band = noise_band(durs_b, durs_a)
    speedup = round(mb / ma, 4)
    sb, sa = _signals(rb), _signals(ra)
    pb, pa = _median_launch(rb), _median_launch(ra)
    db = next(d for p, d in rb if p is pb)
    da = next(d for p, d in ra if p is pa)
    warnings = []
    fb, fa = pb.metrics.get("sm_frequency"), pa.metrics.get("sm_frequency")
    if fb and fa and abs(fa / fb - 1) > CLOCK_MISMATCH:
        warnings.append(f"SM clocks differ: {fb / 1e6:.0f} MHz before, {fa / 1e6:.0f} MHz after; the durations are not comparable "
                        "(capture both with the same --clock-control)")
    return KernelComparison(
        before_kernel=kb, after_kernel=ka, matched_by=how, before_launches=len(rb), after_launches=len(ra),
        before_ns=round(mb, 1), after_ns=round(ma, 1), speedup=speedup, noise=band, verdict=judge_speedup(speedup, band),
        before_top=db.top, after_top=da.top,
        resolved=[SignalChange(signal=s, before=v) for s, v in sorted(sb.items(), key=lambda x: -x[1]) if s not in sa],
        appeared=[SignalChange(signal=s, after=v) for s, v in sorted(sa.items(), key=lambda x: -x[1]) if s not in sb],
        persisting=[SignalChange(signal=s, before=v, after=sa[s], change=round(sa[s] - v, 4)) for s, v in sorted(sb.items(), key=lambda x: -x[1]) if s in sa],
        deltas=_deltas(pb, pa, db, da), warnings=warnings)


def compare_parsed(before: ParseResult, after: ParseResult, before_name: str = "before", after_name: str = "after",
                   kernel: str | None = None, deadline: float | None = None) -> Comparison:
    """Compare two parsed exports (optionally only the launches of ``kernel``); the after side is diagnosed in full.
    ``deadline`` (``time.monotonic()``) stops both diagnoses with a 503 ``timeout`` once passed."""
    pb = select_kernel(before.profiles[:MAX_LAUNCHES], kernel) if kernel else before.profiles[:MAX_LAUNCHES]
    pa = select_kernel(after.profiles[:MAX_LAUNCHES], kernel) if kernel else after.profiles[:MAX_LAUNCHES]
    b = _Side(pb, diagnose_parsed(ParseResult(format=before.format, profiles=list(pb)), before_name, deadline=deadline))
    a = _Side(pa, diagnose_parsed(ParseResult(format=after.format, profiles=list(pa)), after_name, deadline=deadline))
    pairs = _match(b, a)
    out = Comparison(before=before_name[:300], after=after_name[:300], verdict="no-match", after_diagnosis=a.diagnosis,
                     unmatched_before=[x for x in b.kernels if x not in {p[0] for p in pairs}],
                     unmatched_after=[x for x in a.kernels if x not in {p[1] for p in pairs}])
    out.kernels = [_compare_kernel(kb, ka, how, b, a) for kb, ka, how in pairs]
    if out.kernels:
        tb, ta = sum(c.before_ns for c in out.kernels), sum(c.after_ns for c in out.kernels)
        out.speedup = round(tb / ta, 4) if ta > 0 else None
        out.verdict = judge_speedup(out.speedup, max(c.noise for c in out.kernels)) if out.speedup else "no-match"
    out.warnings = sorted({w for c in out.kernels for w in c.warnings})
    if out.unmatched_before or out.unmatched_after:
        out.warnings.append(f"{len(out.unmatched_before)} kernel(s) only before, {len(out.unmatched_after)} only after: not compared")
    return out


def compare_bytes(before: bytes, before_name: str, after: bytes, after_name: str, max_bytes: int = MAX_BYTES,
                  kernel: str | None = None, deadline: float | None = None) -> Comparison:
    """Compare two uploaded exports (any format :func:`parse_bytes` reads). Raises :class:`BadInput`."""
    for data, name in ((before, before_name), (after, after_name)):
        if len(data) > max_bytes:
            raise BadInput(f"{name} is {len(data)} bytes, over the {max_bytes}-byte limit")
    out = compare_parsed(parse_bytes(before, before_name, max_bytes=max_bytes), parse_bytes(after, after_name, max_bytes=max_bytes),
                         before_name, after_name, kernel, deadline=deadline)
    if out.after_diagnosis is not None:
        attach_timelines(out.after_diagnosis.launches, after, max_bytes)
    return out


def comparison_evidence(c: Comparison) -> dict[str, object]:
    """The comparison as the ledger stores it under ``evidence.comparison`` (compact: no diagnosis, no deltas)."""
    return {"baseline": c.before, "candidate_report": c.after, "verdict": c.verdict, "speedup": c.speedup, "rule": c.rule,
            "kernels": [{"before": k.before_kernel, "after": k.after_kernel, "speedup": k.speedup, "noise": k.noise,
                         "verdict": k.verdict, "resolved": [s.signal for s in k.resolved], "appeared": [s.signal for s in k.appeared],
                         "persisting": {s.signal: s.change for s in k.persisting}} for k in c.kernels],
            "warnings": c.warnings}
