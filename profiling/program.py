"""Whole programs: kernels ranked by their share of GPU time, and the kernel a user asked about.

An export of a framework program (a model's forward pass) holds hundreds of launches of dozens of
kernels. :func:`rank_kernels` sums ``gpu__time_duration`` per kernel name so the diagnosis can lead with
the kernels that matter; :func:`select_kernel` keeps the launches of one kernel and fails clearly,
listing what the export does hold, when the asked kernel is not in it.

    >>> from kwiki.profiling.ncu_csv import LaunchProfile
    >>> ps = [LaunchProfile(kernel="gemm", launch_id="0", metrics={"duration": 30.0}),
    ...       LaunchProfile(kernel="add", launch_id="1", metrics={"duration": 10.0}),
    ...       LaunchProfile(kernel="gemm", launch_id="2", metrics={"duration": 30.0})]
    >>> [(s.kernel, s.launches, s.share) for s in rank_kernels(ps)]
    [('gemm', 2, 0.8571), ('add', 1, 0.1429)]
"""

from __future__ import annotations

from typing import Sequence

from pydantic import BaseModel

from kwiki.errors import BadInput

from .ncu_csv import LaunchProfile
from .rulebase import thr


class KernelShare(BaseModel):
    """One kernel of an export: its launches, total GPU time and share of the export's GPU time."""

    kernel: str
    launches: int
    total_ns: float
    share: float
    longest: int = 0  # index, among this kernel's launches in export order, of its longest launch
    top: str | None = None  # the top signal of that launch


def _name(p: LaunchProfile) -> str:
    return p.kernel or p.name


def rank_kernels(profiles: Sequence[LaunchProfile]) -> list[KernelShare]:
    """Kernels by total ``gpu__time_duration``, largest first (launches without a duration count 0 ns)."""
    acc: dict[str, list[float]] = {}
    for p in profiles:
        acc.setdefault(_name(p), []).append(max(0.0, p.metrics.get("duration", 0.0)))
    total = sum(sum(v) for v in acc.values())
    out = [KernelShare(kernel=k, launches=len(v), total_ns=round(sum(v), 1), share=round(sum(v) / total, 4) if total > 0 else 0.0,
                       longest=max(range(len(v)), key=lambda i: v[i])) for k, v in acc.items()]
    return sorted(out, key=lambda s: (-s.total_ns, s.kernel))


class ProgramSignal(BaseModel):
    """One entry of a program's reading: a program-wide signal (``kernel`` None) or a kernel's own signal, with its
    magnitude as a share of the whole program's wall time (the launch's magnitude x the kernel's share of it)."""

    signal: str
    magnitude: float
    kernel: str | None = None
    note: str = ""


class ProgramReading(BaseModel):
    """An export of several launches read as one program: where its wall time goes, biggest share first."""

    launches: int
    short_launches: int
    gpu_ns: float
    launch_cost_ns: float  # the launch cost the short launches add: launch-overhead's launch_cost_ns each
    signals: list[ProgramSignal] = []
    summary: str = ""


def read_program(kernels: Sequence[KernelShare], durations: Sequence[float],
                 top_signals: dict[str, list[tuple[str, float]]]) -> ProgramReading | None:
    """The program-level reading of an export of two launches or more. A launch shorter than launch-overhead's
    ``duration_ns`` leaves the GPU idle for about ``launch_cost_ns`` (the per-launch rule's reading), so the program's
    wall time is its GPU time plus that cost per short launch, and launch overhead's share of it is
    ``n_short x cost / (gpu + n_short x cost)``. Each kernel's own signals (``top_signals``: its longest launch's, as
    ``(signal, magnitude)``) count for the kernel's share of the same wall time, so one kernel's small grid is weighed
    against the launch cost of the whole program on one scale."""
    if len(durations) < 2:
        return None
    short_ns, cost = thr("launch-overhead", "duration_ns"), thr("launch-overhead", "launch_cost_ns")
    gpu = sum(max(0.0, d) for d in durations)
    n_short = sum(1 for d in durations if 0 < d < short_ns)
    wall = gpu + n_short * cost
    if wall <= 0:
        return None
    out: list[ProgramSignal] = []
    if n_short >= 2:
        out.append(ProgramSignal(signal="launch-overhead", magnitude=round(n_short * cost / wall, 4), note=(
            f"{n_short} of {len(durations)} launches under {short_ns / 1e3:g} us: about {n_short * cost / 1e3:.0f} us of launch "
            f"cost against {gpu / 1e3:.0f} us of GPU time (CUDA graphs or fusion remove it)")))
    for ks in kernels:
        for sig, mag in top_signals.get(ks.kernel, []):
            if sig == "launch-overhead" and out and out[0].kernel is None:
                continue  # counted once, program-wide
            out.append(ProgramSignal(signal=sig, kernel=ks.kernel, magnitude=round(mag * ks.total_ns / wall, 4),
                                     note=f"{mag:.2f} of this kernel's time, {ks.total_ns / wall:.0%} of the program's"))
    out.sort(key=lambda x: -x.magnitude)
    lead = out[0] if out else None
    summary = "" if lead is None else (f"program: {lead.signal} ({lead.magnitude:.2f} of the wall time)"
                                       + (f" in {lead.kernel[:80]}" if lead.kernel else f": {lead.note}"))
    return ProgramReading(launches=len(durations), short_launches=n_short, gpu_ns=round(gpu, 1),
                          launch_cost_ns=round(n_short * cost, 1), signals=out[:20], summary=summary)


def select_kernel(profiles: Sequence[LaunchProfile], kernel: str) -> list[LaunchProfile]:
    """The launches whose kernel name contains ``kernel`` (case-insensitive); BadInput naming the kernels present otherwise."""
    want = kernel.strip().lower()
    if not want:
        raise BadInput("the kernel name to select is empty", hint="pass part of a kernel name, e.g. --kernel gemm")
    hits = [p for p in profiles if want in _name(p).lower()]
    if not hits:
        present = [s.kernel for s in rank_kernels(profiles)][:10]
        raise BadInput(f"no launch of a kernel matching {kernel!r} in this export: it is an export of another kernel",
                       hint="kernels in it, by GPU time: " + "; ".join(k[:80] for k in present))
    return hits
