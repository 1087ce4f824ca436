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
