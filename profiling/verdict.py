"""Honest verdicts: validity checks first, then "at the speed of light" before any minor limiter.

:func:`judge` takes the ranked signals of one launch and its metrics and returns them re-ranked with a
:class:`Verdict`:

* **validity** - clocks below the GPU's maximum (ncu's default ``--clock-control base``, or throttling), counters
  that read zero, too few PC samples, a first launch that looks like a warm-up (:func:`program_checks`);
* **speed of light** - a unit at >= 80% of its peak over the elapsed time with no waste signal behind it is
  reported first, with what would still help (less work, another algorithm, another precision);
* **by design** - limiters that a kernel at the speed of light has on purpose (one CTA per SM in a persistent
  GEMM limits occupancy; its latency stalls are hidden) are kept, flagged ``by_design`` and ranked after it.

    >>> from kwiki.profiling.rules import evaluate
    >>> ev = evaluate({"sm_throughput_pct": 93.5, "memory_throughput_pct": 94.7, "pipe_tensor_cycles_pct": 96.9,
    ...                "grid_size": 132, "sm_count": 132, "occ_limit_registers": 1, "theoretical_occupancy": 18.8})
    >>> ev.verdict.status, ev.fired[0].signal, ev.verdict.unit
    ('speed-of-light', 'speed-of-light', 'tensor pipe')
"""

from __future__ import annotations

import statistics
from typing import Literal, Mapping, Sequence

from .rulebase import FMA_MATMUL, Check, Evidence, Fired, Metrics, Verdict, g, tensor_pct, thr

# Signals that mean the busy unit moves or executes waste; any of them at >= max_waste keeps a kernel off the
# speed of light however busy its units are (coalescing-bad runs DRAM at 92% moving sectors 7/8 wasted).
WASTE_SIGNALS = ("uncoalesced-global", "sparse-stores", "smem-bank-conflicts", "register-spilling", "warp-divergence",
                 "atomic-contention", "cache-thrashing", "tail-effect", "small-grid", "load-imbalance")
# The saturated unit itself: the limiter of a kernel at the speed of light, ranked right after it.
BOUND_SIGNALS = ("tensor-pipe-bound", "fma-bound", "dram-bound", "l2-bound", "math-pipe-throttle", "lg-throttle")
# Limiters that cost nothing once a unit is at its peak: the kernel has them by design.
BY_DESIGN_AT_SOL = ("occupancy-registers", "occupancy-shared-memory", "occupancy-block-size", "long-scoreboard",
                    "short-scoreboard", "mio-throttle", "barrier-stalls", "low-ipc", "tensor-pipe-underused",
                    "instruction-fetch-stalls", "membar-stalls", "launch-overhead")
OCCUPANCY_SIGNALS = ("occupancy-registers", "occupancy-shared-memory", "occupancy-block-size")
BY_DESIGN_DAMPING = 0.25  # a by-design limiter keeps a quarter of its magnitude: listed, never ahead of a real problem

# Validity thresholds, each with its reason.
CLOCK_MIN_RATIO = 0.93  # ncu's default --clock-control base locks H100/H200 SMs near 1.6 of 1.98 GHz (0.81); boost
# wanders a few percent with temperature, so only a launch more than 7% below the maximum is flagged
MIN_PC_SAMPLES = 1000   # per-line stall shares from fewer warp samples move by several points between runs
WARMUP_RATIO = 1.3      # a first launch 30% slower than the median of the later ones of the same kernel is a warm-up
# (lazy module load, cold TLBs, autotuning); run-to-run spread of one kernel under ncu is ~1% on the H200 fixtures
WARMUP_MIN_LAUNCHES = 3
IDLE_PCT = 10.0  # atomic-contention's inferred_idle_pct: no unit past 10% of peak means no bulk work
LONG_IDLE_NS = 100_000.0  # idle for 100 us is no launch-overhead case (those last a few us)
MAX_NAMED_MISSING = 40  # name every missing counter of a basic-set export (about 30), not a sample of them
BOUND_YIELD = 0.5  # a waste signal at half a bound signal's magnitude or more is the better lead (fma-bound's own
# weight, 0.6, already calls a saturated pipe "the healthy end state")
MIN_TOP_MAGNITUDE = 0.05  # below this a fired signal is noise next to run-to-run spread (tail-effect's own bar)
PERSISTENT_MIN_TENSOR_PCT = 10.0  # the tensor-pipe bar of tensor-pipe-underused: below it the kernel is not a matmul

STILL_HELPS: dict[str, list[str]] = {
    "tensor pipe": ["less work: skip padding and masked tiles, exploit structured sparsity (2:4 sparse MMA)",
                    "another precision: FP8 wgmma runs at twice the bf16 rate on Hopper",
                    "another algorithm or fusion: fold the epilogue and neighbouring element-wise ops into the GEMM to save memory passes"],
    "FMA pipe": ["another precision or unit: tensor cores (TF32/bf16/FP8 MMA) run 10-15x the FP32 FMA rate on Hopper",
                 "less work: fewer instructions per result (strength reduction, reuse of partial results)"],
    "SM issue": ["fewer instructions: vectorize, hoist invariant address math, use intrinsics",
                 "move the arithmetic to a faster unit (tensor cores) or fuse it with a memory-bound neighbour"],
    "DRAM": ["fewer bytes: fuse with the producer or consumer so the data crosses DRAM once",
             "another precision: bf16/FP8 storage halves or quarters the bytes", "more reuse: keep the working set in L2 or shared memory"],
    "L2": ["more reuse closer to the SM: larger tiles in shared memory or registers, TMA multicast across a cluster",
           "fewer bytes: lower-precision operands, fusion"],
    "L1/shared": ["fewer shared-memory wavefronts: wider (128-bit) accesses, register tiling"],
    "memory": ["fewer bytes: fusion, lower-precision storage, more on-chip reuse"],
}


def _units(m: Metrics) -> list[tuple[str, float]]:
    tensor = tensor_pct(m)
    pairs = [("tensor pipe", tensor), ("FMA pipe", g(m, "pipe_fma_cycles_pct")), ("SM issue", g(m, "issue_active_pct")),
             ("DRAM", g(m, "dram_throughput_pct")), ("L2", g(m, "l2_throughput_pct")), ("L1/shared", g(m, "l1_throughput_pct"))]
    return sorted(((n, v) for n, v in pairs if v is not None), key=lambda x: -x[1])


UNIT_PRIORITY = ("tensor pipe", "DRAM", "FMA pipe", "L2", "L1/shared", "SM issue")
UNIT_NEAR_PEAK = 75.0  # a pipe's cycles are read per active cycle and a memory unit's per elapsed cycle: the unit named
# is the first, in UNIT_PRIORITY order (the unit that does the work before the ones it feeds), within 5 points of the
# 80% bar; a streaming kernel at 85% DRAM also shows L2 at 91%, and the DRAM is its limit


def _sol_unit(units: Sequence[tuple[str, float]]) -> tuple[str, float] | None:
    """The unit doing the work near its peak, or None: sm__throughput can be high from a sub-unit that does no useful
    work by itself (barrier-bad: 95% with 53% of its stalls at barriers and no pipe past 62%)."""
    by_name = dict(units)
    for name in UNIT_PRIORITY:
        if by_name.get(name, 0.0) >= UNIT_NEAR_PEAK:
            return name, by_name[name]
    return None


def validity_checks(m: Metrics) -> list[Check]:
    """Checks one launch's metrics can answer alone (clocks, zero counters, PC samples)."""
    out: list[Check] = []
    f, fmax = g(m, "sm_frequency"), g(m, "max_sm_frequency_khz")
    if f and fmax and f / (fmax * 1e3) < CLOCK_MIN_RATIO:
        out.append(Check(check="clocks", level="warning", message=(
            f"the SM clock averaged {f / 1e6:.0f} MHz, {f / (fmax * 1e3):.0%} of the GPU's {fmax / 1e3:.0f} MHz: clocks were locked "
            "(ncu's default --clock-control base) or throttled under load; durations and throughputs are at that clock, so compare "
            "only exports captured the same way (profile with --clock-control none to see the application's clocks)")))
    dur = g(m, "duration")
    work = [v for k in ("sm_throughput_pct", "memory_throughput_pct", "issue_active_pct", "inst_executed") if (v := g(m, k)) is not None]
    if dur is not None and dur <= 0:
        out.append(Check(check="zero-counters", level="error", message="gpu__time_duration reads 0: the launch was not measured"))
    elif len(work) >= 2 and all(v == 0 for v in work):
        out.append(Check(check="zero-counters", level="error", message=(
            "every throughput and instruction counter reads zero: the counters were not collected (a runtime without "
            "hardware-counter access, or a replay that failed) or the launch did no work")))
    samples = g(m, "pcsamp_sample_count")
    if samples is not None and samples < MIN_PC_SAMPLES:
        out.append(Check(check="few-samples", level="warning", message=(
            f"{samples:.0f} warp-state samples (smsp__pcsamp_sample_count): per-line stall shares rest on fewer than "
            f"{MIN_PC_SAMPLES}; profile a longer launch or several (-c N) before acting on a single line")))
    return out


def _persistent_by_design(fired: list[Fired], m: Metrics) -> None:
    """One CTA per SM in a tensor-core kernel whose grid fits one wave is a persistent / warp-specialized design: its
    latency hiding comes from the pipeline inside the CTA, not from occupancy, so the occupancy limit is by design."""
    tensor = tensor_pct(m) or 0.0
    lims = [v for k in ("occ_limit_registers", "occ_limit_shared_mem", "occ_limit_warps", "occ_limit_blocks") if (v := g(m, k)) is not None and v > 0]
    grid, sms = g(m, "grid_size"), g(m, "sm_count")
    if tensor < PERSISTENT_MIN_TENSOR_PCT or not lims or min(lims) > 1 or not grid or not sms or grid > sms:
        return
    for f in fired:
        if f.signal in (*OCCUPANCY_SIGNALS, "small-grid"):
            f.magnitude = round(f.magnitude * BY_DESIGN_DAMPING, 4)
            f.evidence.append(Evidence(metric="by design", value="persistent", threshold=None, note=(
                f"one CTA per SM, a grid of {grid:g} on {sms:g} SMs and the tensor pipe at {tensor:.0f}%: a persistent, "
                "warp-specialized kernel; more CTAs per SM would not hide more latency")))
    fired.sort(key=lambda f: -f.magnitude)


def _not_binding(fired: list[Fired], signals: Sequence[str], why: Evidence) -> None:
    """Damp each of ``signals`` like a by-design limiter and mark it ``not binding`` with ``why`` (once per signal)."""
    for f in fired:
        if f.signal in signals and not any(e.metric in ("by design", "not binding") for e in f.evidence):
            f.magnitude = round(f.magnitude * BY_DESIGN_DAMPING, 4)
            f.evidence.append(why.model_copy())
    fired.sort(key=lambda f: -f.magnitude)


def _one_wave_not_binding(fired: list[Fired], m: Metrics) -> None:
    """An occupancy limit binds only when CTAs wait for a slot: a grid that fits in one wave at the current limit
    (``launch__waves_per_multiprocessor`` <= 1) already has every CTA resident, so raising the limit would place no
    more warps. The limiter is kept, damped like a by-design one and marked ``not binding``."""
    waves, grid = g(m, "waves_per_sm"), g(m, "grid_size")
    if waves is None or waves > 1:
        return
    _not_binding(fired, OCCUPANCY_SIGNALS, Evidence(metric="not binding", value=f"{waves:g} waves", threshold="<= 1", note=(
        f"the whole grid ({grid:g} CTAs) is resident at once: a higher occupancy limit would place no more warps; "
        "what is short is the work in flight (more CTAs, smaller tiles, split-K)" if grid else
        "the whole grid is resident at once: a higher occupancy limit would place no more warps")))


def _spilling_not_binding(fired: list[Fired]) -> None:
    """A register limit on occupancy binds only if the kernel could run with fewer registers: one that already spills
    at its register count would spill more under a cap (``__launch_bounds__``, ``-maxrregcount``) that fits more warps.
    The limiter is kept, damped and marked ``not binding``; the spill is the finding (fewer live values, smaller
    tiles, or more warps per CTA sharing the work)."""
    if any(f.signal == "register-spilling" for f in fired):
        _not_binding(fired, ("occupancy-registers",), Evidence(metric="not binding", value="spilling", threshold=None, note=(
            "the kernel already spills registers to local memory at this register count: fewer registers per thread "
            "to fit more warps would spill more")))


def _is_waste(f: Fired) -> bool:
    """A waste signal, or a matrix product on the FMA pipe (the busy pipe does work tensor cores do 7x faster)."""
    return f.signal in WASTE_SIGNALS or (f.signal == "tensor-pipe-underused" and any(e.metric == FMA_MATMUL for e in f.evidence))


def _waste_before_bound(fired: list[Fired]) -> list[Fired]:
    """A busy unit (fma-bound, dram-bound, ...) says where the time goes; a waste signal says what to fix. A waste
    signal within BOUND_YIELD of a bound signal ranked above it moves ahead of it (tail_effect-bad: tail-effect 0.50,
    fma-bound 0.48 - the FMA pipe is busy 80% of the active cycles in both variants, the tail is what the fix removes)."""
    out = list(fired)
    for w in [f for f in fired if _is_waste(f)]:
        i = out.index(w)
        j = next((k for k, f in enumerate(out[:i]) if f.signal in BOUND_SIGNALS and w.magnitude >= BOUND_YIELD * f.magnitude), None)
        if j is not None:
            out.insert(j, out.pop(i))
    return out


def _designed(fired: Sequence[Fired]) -> list[str]:
    return [f.signal for f in fired if any(e.metric == "by design" for e in f.evidence)]


def _speed_of_light(lead: Fired, rest: list[Fired], unit: str, pct: float, checks: list[Check],
                    head: str) -> tuple[list[Fired], Verdict]:
    """The speed-of-light reading: ``lead`` first, the saturated unit's bound signals next, the limiters a kernel at
    its roof has by design damped and last, and what would still help for ``unit``."""
    bound = [f for f in rest if f.signal in BOUND_SIGNALS]
    designed = [f for f in rest if f.signal in BY_DESIGN_AT_SOL]
    others = [f for f in rest if f not in bound and f not in designed]
    for f in designed:
        f.magnitude = round(f.magnitude * BY_DESIGN_DAMPING, 4)
        f.evidence.append(Evidence(metric="by design", value="speed-of-light", threshold=None, note=(
            f"the {unit} runs at {pct:.0f}% of peak: this limiter costs nothing the kernel could win back")))
    ordered = [lead, *bound, *others, *sorted(designed, key=lambda f: -f.magnitude)]
    helps = STILL_HELPS.get(unit, STILL_HELPS["memory"])
    return ordered, Verdict(status="speed-of-light", unit=unit, unit_pct=round(pct, 2), still_helps=helps,
                            by_design=_designed(ordered), checks=checks, summary=f"{head} - what would still help: {helps[0]}")


def judge(ranked: Sequence[Fired], m: Metrics, missing: Sequence[str] = ()) -> tuple[list[Fired], Verdict]:
    """Re-rank one launch's fired signals honestly and say what they amount to (see the module docstring)."""
    checks = validity_checks(m)
    fired = [f.model_copy(deep=True) for f in ranked]
    sol = next((f for f in fired if f.signal == "speed-of-light"), None)
    rest = [f for f in fired if f.signal != "speed-of-light"]
    units = _units(m)
    if any(c.level == "error" for c in checks):
        return rest, Verdict(status="invalid", summary="; ".join(c.message for c in checks if c.level == "error"), checks=checks)
    _persistent_by_design(rest, m)
    _one_wave_not_binding(rest, m)
    _spilling_not_binding(rest)
    waste = [f for f in rest if _is_waste(f) and f.magnitude >= thr("speed-of-light", "max_waste")]
    named = _sol_unit(units) if sol is not None else None
    if sol is not None and not waste and named is not None:
        unit, pct = named
        sol.evidence.append(Evidence(metric=f"busiest unit: {unit}", value=round(pct, 2), threshold=None,
                                     note="no waste signal (uncoalesced/sparse accesses, conflicts, spills, divergence, atomics, tail) fired"))
        return _speed_of_light(sol, rest, unit, pct, checks, (
            f"at the speed of light: the {unit} runs at {pct:.0f}% of its peak and no waste signal fired; "
            "nothing in this kernel's execution is left to fix"))
    if sol is not None and waste:
        sol_note = (f"{sol.evidence[0].value}% of peak, but the busy unit is busy with waste ({', '.join(f.signal for f in waste)}): "
                    "not the speed of light")
    elif sol is not None:
        sol_note = (f"{sol.evidence[0].value}% of peak in {sol.evidence[0].metric.split('.')[0]}, but no work unit (tensor or FMA pipe, "
                    f"DRAM, L2, L1, issue) is past {UNIT_NEAR_PEAK:g}%: not the speed of light")
    else:
        sol_note = ""
    rest = _waste_before_bound(rest)
    if rest and rest[0].magnitude >= MIN_TOP_MAGNITUDE:
        top = rest[0]
        partial = top.source != "metrics" or any(e.metric == "inferred" for e in top.evidence)
        status: Literal["limited", "partial"] = "partial" if partial else "limited"
        summary = f"limited by {top.signal} (magnitude {top.magnitude:.2f})" + (f"; {sol_note}" if sol_note else "")
        inferred = next((e for e in top.evidence if e.metric == "inferred"), None)
        if inferred is not None:
            summary += f"; inferred {inferred.value} ({inferred.note})"
        elif partial:
            summary += f" from ncu's own rule message ({top.source}), not from the counters"
        return rest, Verdict(status=status, summary=summary, unit=units[0][0] if units else None,
                             unit_pct=round(units[0][1], 2) if units else None, checks=checks, by_design=_designed(rest))
    if missing:
        checks.append(Check(check="missing-counters", level="warning", message=(
            f"no signal fired, and the export lacks {len(missing)} counters the rules need: this is a partial diagnosis; "
            "capture the sections named in next_step")))
        busy = max(g(m, "sm_throughput_pct") or 0.0, g(m, "memory_throughput_pct") or 0.0)
        dur = g(m, "duration")
        seen = ""
        if dur is not None and busy < IDLE_PCT and dur >= LONG_IDLE_NS:
            seen = (f"every unit idles (at most {busy:.1f}% of peak) for {dur / 1e3:.0f} us: latency or serialization (atomics on few "
                    "addresses, a lock, a dependent chain); the stall reasons (WarpStateStats) and the L2 atomic counters "
                    "(MemoryWorkloadAnalysis_Tables) would tell which. ")
        return rest, Verdict(status="partial", checks=checks, unit=units[0][0] if units else None,
                             unit_pct=round(units[0][1], 2) if units else None,
                             summary=f"{seen}nothing fired on the metrics present; missing: " + ", ".join(missing[:MAX_NAMED_MISSING]))
    near = _sol_unit(units)
    if near is not None:
        # nothing fired, and a work unit is within 5 points of the bar: the kernel is at its roof as measured
        unit, pct = near
        sm = g(m, "sm_throughput_pct")
        lead = Fired(signal="speed-of-light", magnitude=round(pct / 100, 4), evidence=[
            Evidence(metric=f"busiest unit: {unit}", value=round(pct, 2), threshold=f">= {UNIT_NEAR_PEAK:g}", note=(
                "no signal fired (no waste, no latency limiter)"
                + (f"; sm__throughput.avg.pct_of_peak_sustained_elapsed {sm:.1f}%, under ncu's {thr('speed-of-light', 'sol_pct'):g}% bar"
                   if sm is not None else "")))])
        return _speed_of_light(lead, rest, unit, pct, checks,
                               f"near the speed of light: no signal fired and the {unit} runs at {pct:.0f}% of its peak")
    busiest = f"; the busiest unit, {units[0][0]}, at {units[0][1]:.0f}% of peak" if units else ""
    return rest, Verdict(status="no-signal", checks=checks, summary=f"no signal fired on the counters the export holds{busiest}",
                         unit=units[0][0] if units else None, unit_pct=round(units[0][1], 2) if units else None)


def warmup_message(durations: Sequence[float], index: int) -> str | None:
    """A warning when launch ``index`` (the first of a kernel's launches) is a warm-up next to the later ones."""
    if index != 0 or len(durations) < WARMUP_MIN_LAUNCHES:
        return None
    later = statistics.median(durations[1:])
    if later > 0 and durations[0] > WARMUP_RATIO * later:
        return (f"this first launch took {durations[0] / 1e3:.1f} us against a median of {later / 1e3:.1f} us for the "
                f"{len(durations) - 1} later ones: a warm-up (lazy loading, autotuning, cold caches); diagnose a later launch")
    return None


def program_checks(durations_by_kernel: Mapping[str, Sequence[float]]) -> dict[tuple[str, int], Check]:
    """Export-wide checks keyed by (kernel, launch index within that kernel): warm-ups."""
    out: dict[tuple[str, int], Check] = {}
    for kernel, durs in durations_by_kernel.items():
        msg = warmup_message(list(durs), 0)
        if msg:
            out[(kernel, 0)] = Check(check="warm-up", level="warning", message=msg)
    return out
