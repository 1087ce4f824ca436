"""Building blocks of the diagnosis rules: result models, stall shares and the weights rules share.

    >>> from kwiki.profiling.rulebase import stall_shares
    >>> stall_shares({"stall_long_scoreboard": 3.0, "stall_wait": 1.0, "stall_barrier": 0.0, "stall_selected": 1.0})
    {'barrier': 0.0, 'long_scoreboard': 0.75, 'wait': 0.25}
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Literal, Mapping

from pydantic import BaseModel, Field

from .signals import load_signals

Metrics = Mapping[str, float]

#: Context key set to 1.0 for a launch whose kernel name says it is a matrix product (:data:`MATMUL_NAME`).
MATMUL_NAMED = "matmul_named"
#: Kernel names of matrix products in NVIDIA's libraries and in user code: cuBLAS/CUTLASS ``*gemm*`` (cuDNN's
#: implicit-GEMM convolutions too), ``xmma`` and ``nvjet`` kernels, ``matmul`` kernels of Triton and user code.
MATMUL_NAME = re.compile(r"gemm|matmul|xmma|nvjet", re.IGNORECASE)
#: Evidence metric of tensor-pipe-underused read as a matrix product on the FP32 FMA pipe: waste at any FMA rate.
FMA_MATMUL = "matrix product on the FMA pipe"

STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
                 "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
                 "short_scoreboard", "sleeping", "tex_throttle", "wait", "gmma", "warpgroup_arrive")
_FAMILIES = ("", "_samples", "_cycles", "_pct")


class Evidence(BaseModel):
    """One observation behind a fired signal: the metric (ncu name or a ratio of them), its value and the bar."""

    metric: str
    value: float | str
    threshold: float | str | None = None
    note: str = ""


class Fired(BaseModel):
    """A signal that fired; ``magnitude`` estimates the share of runtime at stake (0..1)."""

    signal: str
    magnitude: float
    evidence: list[Evidence] = Field(default_factory=list)
    source: str = "metrics"


class Missing(BaseModel):
    """A signal that could not be evaluated, with the canonical metric ids it needed."""

    signal: str
    metrics: list[str]


class Check(BaseModel):
    """One validity check that did not pass."""

    check: Literal["clocks", "zero-counters", "few-samples", "warm-up", "other-kernel", "missing-counters"]
    level: Literal["error", "warning"]
    message: str


class Verdict(BaseModel):
    """What a launch's diagnosis amounts to, in one status, before the ranked signals."""

    status: Literal["speed-of-light", "limited", "partial", "no-signal", "invalid"]
    summary: str
    unit: str | None = None
    unit_pct: float | None = None
    still_helps: list[str] = Field(default_factory=list)
    by_design: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)


class Evaluation(BaseModel):
    """All rule outcomes for one launch, fired signals ranked best first."""

    fired: list[Fired] = Field(default_factory=list)
    missing: list[Missing] = Field(default_factory=list)
    stall_shares: dict[str, float] = Field(default_factory=dict)
    verdict: Verdict | None = None


Outcome = Fired | Missing | None


# ------------------------------------------------------------------ helpers
def g(m: Metrics, key: str) -> float | None:
    """``m[key]`` as a finite float, else None."""
    v = m.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def thr(signal: str, name: str) -> float:
    return load_signals()[signal].threshold(name)


def clip(x: float) -> float:
    return round(max(0.0, min(1.0, x)), 4)


def fire(signal: str, mag: float, *ev: tuple[str, Any, Any] | tuple[str, Any, Any, str]) -> Fired:
    return Fired(signal=signal, magnitude=clip(mag), evidence=[
        Evidence(metric=e[0], value=round(e[1], 4) if isinstance(e[1], float) else e[1], threshold=e[2],
                 note=e[3] if len(e) > 3 else "") for e in ev])


TENSOR_PIPES = ("pipe_tensor_cycles_pct", "pipe_tensor_gmma_cycles_pct", "pipe_tensor_hmma_cycles_pct", "pipe_tc_cycles_pct")
TENSOR_OPS = ("tensor_ops_bf16_pct", "tensor_ops_fp16_pct", "tensor_ops_fp8_pct", "tensor_ops_tf32_pct", "tensor_ops_int8_pct",
              "tensor_ops_fp64_pct")


def tensor_pct(m: Metrics) -> float | None:
    """The busiest tensor pipe's active share, or None without a tensor counter. On Hopper (the export holds the
    gh100-only wgmma instruction counter) where every tensor operation counter reads 0, no MMA ran and the share is
    0: the pipe-cycle counters count ptxas's constant-building HFMA2.MMA and read 19% in a kernel of FFMAs alone
    (blind4's b4_07 on the H200). Other chips are read as before: their operation counters were not measured.

    >>> tensor_pct({"pipe_tensor_cycles_pct": 18.6, "tensor_gmma_inst_pct": 0.0, "tensor_ops_bf16_pct": 0.0})
    0.0
    >>> tensor_pct({"pipe_tensor_cycles_pct": 55.1, "tensor_gmma_inst_pct": 0.0, "tensor_ops_bf16_pct": 49.4})
    55.1
    >>> tensor_pct({"pipe_tensor_cycles_pct": 18.6, "tensor_ops_bf16_pct": 0.0})  # no sm_90 marker
    18.6
    """
    vals = [v for k in TENSOR_PIPES if (v := g(m, k)) is not None]
    if not vals:
        return None
    ops = [v for k in TENSOR_OPS if (v := g(m, k)) is not None]
    hopper = g(m, "tensor_gmma_inst_pct") is not None
    return 0.0 if hopper and ops and max(ops) == 0 else max(vals)


def stall_shares(m: Metrics) -> dict[str, float]:
    """Share of each stall reason in the warp stall total (``selected`` excluded), from the best series present."""
    best: dict[str, float] = {}
    for fam in _FAMILIES:
        vals = {r: v for r in STALL_REASONS if (v := g(m, f"stall_{r}{fam}")) is not None and v >= 0}
        if len(vals) >= 3 and len(vals) > len(best):
            best = vals
    total = sum(v for r, v in best.items() if r != "selected")
    if best and total > 0:
        return {r: v / total for r, v in best.items() if r != "selected"}
    return {k[6:-6]: float(v) for k, v in m.items() if k.startswith("stall_") and k.endswith("_share") and g(m, k) is not None}


def share(m: Metrics, reason: str) -> float | None:
    shares = stall_shares(m)
    if not shares:
        return None
    return shares.get(reason, 0.0)


def latency_w(m: Metrics) -> float:
    """0.5..1: how much stalls cost; issue-bound kernels hide them (0.5), idle schedulers expose them (1)."""
    issue = g(m, "issue_active_pct")
    return 0.75 if issue is None else 0.5 + 0.5 * (1 - min(100.0, issue) / 100)


def stall_rule(signal: str, reason: str, weight: Callable[[Metrics], float] = latency_w) -> Callable[[Metrics], Outcome]:
    def rule(m: Metrics) -> Outcome:
        s = share(m, reason)
        if s is None:
            return Missing(signal=signal, metrics=[f"stall_{reason}"])
        th = thr(signal, "stall_share")
        if s < th:
            return None
        return fire(signal, s * weight(m), (f"stall share {reason} (smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio / all reasons)", s, th))
    rule.__name__ = signal.replace("-", "_")
    rule.__doc__ = f"{signal}: stall '{reason}' share of all warp stalls >= threshold."
    return rule


def traffic_share(m: Metrics, kind: str) -> float:
    """The share of the kernel's memory traffic that its LSU global loads (``kind="ld"``) or stores (``"st"``) make.
    The denominator is the larger of the LSU global sectors and every sector L1TEX sends to L2
    (``lts__t_sectors_srcunit_tex``): for an ordinary kernel the second is the L1 misses of the first and changes
    nothing, but a TMA or ``cp.async.bulk`` kernel moves its tiles past the LSU counters, and a handful of LSU stores
    next to gigabytes of TMA traffic are not a sparse-store problem however they hit their sectors."""
    ld, st = g(m, "global_ld_sectors"), g(m, "global_st_sectors")
    if ld is None or st is None or ld + st <= 0:
        return 1.0
    total = max(ld + st, g(m, "l2_sectors_from_l1") or 0.0)
    return (ld if kind == "ld" else st) / total


def mem_w(m: Metrics) -> float:
    v = g(m, "memory_throughput_pct")
    v = g(m, "dram_throughput_pct") if v is None else v
    return 0.5 if v is None else min(100.0, v) / 100


def sector_efficiency(m: Metrics) -> float:
    effs = []
    for kind in ("ld", "st"):
        bps = g(m, f"bytes_per_sector_global_{kind}")
        if bps is not None and bps > 0:
            effs.append((traffic_share(m, kind), min(32.0, bps) / 32))
    w = sum(t for t, _ in effs)
    return 1.0 if not effs or w <= 0 else sum(t * e for t, e in effs) / w
