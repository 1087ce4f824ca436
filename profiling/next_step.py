"""What to capture next to confirm or localize a diagnosis: the exact ``ncu`` command line.

    >>> s = next_step("uncoalesced-global", "coalescing_bad(const float *, float *, int)")
    >>> s.command.split(" -o ")[0]
    "ncu --clock-control none --set full --import-source yes -k 'regex:^coalescing_bad' -c 1"
    >>> s.build
    'nvcc -lineinfo ...; Triton and torch.compile kernels carry line info unless TRITON_DISABLE_LINE_INFO=1'
"""

from __future__ import annotations

import re
import shlex

from pydantic import BaseModel

# One entry per signal family: the sections that confirm it, whether source lines localize it, and the export.
# Sections are ncu's identifiers (`ncu --list-sections`); "source" means SourceCounters with imported source.
_SOURCE = ("--set full --import-source yes", True, "source")
_TIMELINE = ("--set full --section PmSampling --section PmSampling_WarpStates", False, "timeline")
_PLAN: dict[str, tuple[str, bool, str, str]] = {
    "uncoalesced-global": (*_SOURCE, "the source page's L2 Theoretical Sectors Global Excessive column names the line"),
    "sparse-stores": (*_SOURCE, "the source page's L2 Theoretical Sectors Global Excessive column names the store"),
    "smem-bank-conflicts": (*_SOURCE, "the source page's L1 Conflicts Shared N-Way column names the access"),
    "register-spilling": (*_SOURCE, "lines whose Address Space is Local are the spills; `nvcc -Xptxas -v` prints the spill bytes (Triton: the compiled kernel's n_regs and n_spills)"),
    "warp-divergence": (*_SOURCE, "Avg. Threads Executed per line shows where the warp splits"),
    "atomic-contention": (*_SOURCE, "the hot line is the atomic; MemoryWorkloadAnalysis_Tables counts its L2 reductions"),
    "long-scoreboard": (*_SOURCE, "the line after the load that feeds it carries the long_scoreboard samples"),
    "short-scoreboard": (*_SOURCE, "per-line stall_short_sb samples"),
    "mio-throttle": (*_SOURCE, "per-line stall_mio samples"),
    "lg-throttle": (*_SOURCE, "per-line stall_lg samples"),
    "barrier-stalls": (*_SOURCE, "per-line stall_barrier samples sit on the __syncthreads that waits"),
    "membar-stalls": (*_SOURCE, "per-line stall_membar samples"),
    "instruction-fetch-stalls": (*_SOURCE, "per-line stall_no_inst samples"),
    "math-pipe-throttle": (*_SOURCE, "per-line stall_math samples"),
    "low-ipc": (*_SOURCE, "per-line stall_wait samples show the dependent chain"),
    "tail-effect": (*_TIMELINE, "the PM-sampling timeline shows the SMs going idle in the last wave"),
    "load-imbalance": (*_TIMELINE, "the PM-sampling timeline shows the SM activity falling before the end"),
    "small-grid": (*_TIMELINE, "the PM-sampling timeline shows how few SMs are active"),
    "launch-overhead": ("--section LaunchStats --section SpeedOfLight", False, "raw",
                        "profile every launch (-c 50) to count the short ones; an nsys timeline shows the gaps between them"),
    "occupancy-registers": ("--section Occupancy --section LaunchStats --section WarpStateStats", False, "raw",
                            "`nvcc -Xptxas -v` prints the registers per thread; the Occupancy section the limit"),
    "occupancy-shared-memory": ("--section Occupancy --section LaunchStats --section WarpStateStats", False, "raw",
                                "the Occupancy section's shared-memory limit and the launch's dynamic shared memory"),
    "occupancy-block-size": ("--section Occupancy --section LaunchStats", False, "raw", "the Occupancy section's block limit"),
    "dram-bound": ("--section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section MemoryWorkloadAnalysis_Chart "
                   "--section SpeedOfLight_RooflineChart", False, "raw", "bytes per level against the useful bytes the algorithm needs"),
    "l2-bound": ("--section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section MemoryWorkloadAnalysis_Chart",
                 False, "raw", "L2 hit rate and sectors per request"),
    "cache-thrashing": ("--section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables", False, "raw",
                        "DRAM bytes read against the unique bytes"),
    "fma-bound": ("--section ComputeWorkloadAnalysis --section InstructionStats --section SpeedOfLight_RooflineChart", False, "raw",
                  "the pipe utilization table and the roofline place the kernel"),
    "tensor-pipe-bound": ("--section ComputeWorkloadAnalysis --section SpeedOfLight_RooflineChart", False, "raw",
                          "the tensor pipe's share of peak on the roofline"),
    "tensor-pipe-underused": ("--set full --section PmSampling --section PmSampling_WarpStates", False, "timeline",
                              "the warp states over time show whether the MMA waits on loads (gmma, long_scoreboard)"),
    "no-signal": (*_SOURCE, "no rule fired on a complete export: the source page shows which lines the warps stall on"),
    "speed-of-light": ("--section SpeedOfLight --section SpeedOfLight_RooflineChart", False, "raw",
                       "nothing to localize: the roofline confirms the unit at its peak; compare another algorithm or precision"),
}
_PARTIAL = ("--set full", False, "raw", "the export lacks the counters named in `missing`: --set full collects every section")
_EXPORT = {
    "source": "ncu --import {rep}.ncu-rep --page source --csv --print-source cuda,sass > {rep}.source.csv",
    "timeline": "ncu --import {rep}.ncu-rep --page raw --csv --print-metric-instances values > {rep}.raw.csv",
    "raw": "ncu --import {rep}.ncu-rep --page raw --csv > {rep}.raw.csv",
}


class NextStep(BaseModel):
    """The capture that confirms or localizes a diagnosis, as command lines to paste."""

    signal: str
    command: str
    export: str
    build: str | None = None
    why: str


#: How a build keeps the source-line map the source page needs.
LINEINFO = "nvcc -lineinfo ...; Triton and torch.compile kernels carry line info unless TRITON_DISABLE_LINE_INFO=1"
#: Template nesting read off a kernel name (an export's demangled names nest a few levels; this bounds the work).
MAX_TEMPLATE_DEPTH = 16


def kernel_regex(kernel: str) -> str:
    """``-k regex:`` for a kernel: its base name (no return type, namespaces, template arguments or parameters),
    anchored.

    >>> kernel_regex("void <unnamed>::softmax_warp_forward<c10::BFloat16, float, 10>(T2 *, const T1 *, int)")
    '^softmax_warp_forward'
    >>> kernel_regex("void at::native::(anonymous namespace)::layer_norm_kernel<float, float>(int, float)")
    '^layer_norm_kernel'
    >>> kernel_regex("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_cluster1x2x1_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas")[:20]
    '^sm90_xmma_gemm_bf16'
    """
    name = kernel.strip().replace("(anonymous namespace)", "<unnamed>")
    for _ in range(MAX_TEMPLATE_DEPTH):  # template arguments, innermost first: A<B<C>> -> A
        name, n = re.subn(r"<[^<>]*>", "", name)
        if not n:
            break
    name = re.sub(r"\(.*$", "", name)  # parameters
    name = name.split()[-1] if name.split() else name
    name = name.split("::")[-1] or name
    return "^" + re.escape(name).replace("\\_", "_")


def next_step(signal: str | None, kernel: str, app: str = "./app", have: frozenset[str] = frozenset()) -> NextStep:
    """The ncu command that confirms ``signal`` for ``kernel`` (None: the export was partial; capture the full set).
    ``have`` names the views the user already has ("timeline", "source"): a timeline in hand leads to the source page."""
    sections, needs_lineinfo, export, why = _PLAN.get(signal or "", _PARTIAL)
    if export in have and export == "timeline":
        sections, needs_lineinfo, export = _SOURCE
        why = f"the timeline is in this export; the source page shows which lines the {signal or 'kernel'} time sits on"
    rep = re.sub(r"[^A-Za-z0-9_]+", "_", kernel_regex(kernel).lstrip("^"))[:40] or "kernel"
    cmd = (f"ncu --clock-control none {sections} -k {shlex.quote('regex:' + kernel_regex(kernel))} -c 1 "
           f"-o {rep} {app}")
    return NextStep(signal=signal or "missing-counters", command=cmd, export=_EXPORT[export].format(rep=rep),
                    build=LINEINFO if needs_lineinfo else None, why=why)
