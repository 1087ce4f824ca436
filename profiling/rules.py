"""Diagnosis rules: one pure function per NCU signal over ``{canonical metric id: value}``.

Each rule returns :class:`Fired` (magnitude 0..1 = estimated share of runtime at stake, with the
evidence), :class:`Missing` (the metrics it needs are absent) or None (evaluated, did not fire).
Thresholds come from ``signals.yaml``, each with its source. :func:`evaluate` runs every rule, fills
gaps from ncu's rule messages, lowers symptoms that a fired cause explains, and ranks.

    >>> from kwiki.profiling.rules import evaluate
    >>> ev = evaluate({"grid_size": 32, "sm_count": 132})
    >>> ev.fired[0].signal, round(ev.fired[0].magnitude, 2)
    ('small-grid', 0.76)
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

from .catalog import load_catalog
from .messages import derive_metrics, message_hits
from .rulebase import (
    FMA_MATMUL,
    MATMUL_NAMED,
    STALL_REASONS,
    Evaluation,
    Evidence,
    Fired,
    Metrics,
    Missing,
    Outcome,
    clip,
    fire,
    g,
    latency_w,
    mem_w,
    sector_efficiency,
    share,
    stall_rule,
    stall_shares,
    tensor_pct,
    thr,
    traffic_share,
)
from .signals import SIGNAL_IDS, load_signals
from .verdict import judge

__all__ = ["RULES", "STALL_REASONS", "Evaluation", "Evidence", "Fired", "Missing", "Outcome", "evaluate", "stall_shares"]

# ------------------------------------------------------------------ rules
def small_grid(m: Metrics) -> Outcome:
    """Fewer blocks than SMs: magnitude = share of SMs left idle."""
    grid, sms = g(m, "grid_size"), g(m, "sm_count")
    if grid is None or sms is None or sms <= 0:
        return Missing(signal="small-grid", metrics=["grid_size", "sm_count"])
    th = thr("small-grid", "grid_per_sm")
    if grid >= th * sms:
        return None
    return fire("small-grid", 1 - grid / sms, ("launch__grid_size", grid, f"< launch__sm_count ({sms:g})"))


def _blocks_per_sm(m: Metrics) -> float | None:
    lims = [v for k in ("occ_limit_registers", "occ_limit_shared_mem", "occ_limit_warps", "occ_limit_blocks", "occ_limit_barriers")
            if (v := g(m, k)) is not None and v > 0]
    return min(lims) if lims else None


def tail_effect(m: Metrics) -> Outcome:
    """At least one full wave plus a partial one: magnitude = idle share of the last wave over all waves."""
    grid, sms, bps = g(m, "grid_size"), g(m, "sm_count"), _blocks_per_sm(m)
    full_msg, part_msg = g(m, "msg_full_waves"), g(m, "msg_partial_blocks")
    if grid and sms and bps:
        wave = bps * sms
        full, rem = math.floor(grid / wave), grid - math.floor(grid / wave) * wave
    elif grid and full_msg and part_msg is not None and full_msg > 0:
        full, rem = int(full_msg), part_msg
        wave = (grid - rem) / full_msg
    elif (waves := g(m, "waves_per_sm")) is not None:
        full, wave = math.floor(waves), 1.0
        rem = waves - full
    else:
        return Missing(signal="tail-effect", metrics=["grid_size", "sm_count", "occ_limit_warps", "waves_per_sm"])
    if full < 1 or rem <= 0 or wave <= 0 or full > thr("tail-effect", "max_full_waves"):
        return None
    fill = rem / wave
    mag = (1 - fill) / (full + 1)
    if mag < thr("tail-effect", "min_magnitude"):
        return None
    return fire("tail-effect", mag, ("full waves", float(full), f"<= {thr('tail-effect', 'max_full_waves'):g}"),
                 ("last wave fill (launch__grid_size vs launch__sm_count x min launch__occupancy_limit_*)", fill, "< 1", f"{rem:g} of {wave:g} block slots"))


def load_imbalance(m: Metrics) -> Outcome:
    """Busiest SM much longer than the average, beyond what block-count quantization explains."""
    mx, avg = g(m, "sm_active_cycles_max"), g(m, "sm_active_cycles")
    if mx is None or avg is None or avg <= 0:
        return Missing(signal="load-imbalance", metrics=["sm_active_cycles_max", "sm_active_cycles"])
    grid, sms = g(m, "grid_size"), g(m, "sm_count")
    expected = 1.0
    if grid and sms:
        if grid < sms:
            return None  # small-grid's territory
        per = grid / sms
        expected = math.ceil(per) / per
    ratio = mx / avg / expected
    th = thr("load-imbalance", "max_over_avg")
    if ratio <= th:
        return None
    return fire("load-imbalance", 1 - 1 / ratio, ("sm__cycles_active.max / sm__cycles_active.avg", mx / avg, th, f"quantization alone explains {expected:.2f}"))


def _absorbed_by_l1(m: Metrics) -> bool:
    """The excess sectors of a poor access pattern never left the SM: every sector L1TEX sent to L2
    (``lts__t_sectors_srcunit_tex``, loads that missed, stores, atomics, local traffic) is no more than the sectors
    the global accesses would need if perfectly coalesced (``memory_l2_theoretical_sectors_global_ideal``). The rest
    of each partly used sector was read again by a later instruction and hit in L1, so the pattern costs L1
    wavefronts, not L2 or DRAM bandwidth (eager layer_norm: 12.8 of 32 bytes per sector at L1, yet 11.6M sectors to
    L2 against 21.0M ideal; an AoS gather wastes past L1: 18.9M to L2 against 10.5M ideal)."""
    to_l2, ideal = g(m, "l2_sectors_from_l1"), g(m, "l2_theoretical_sectors_global_ideal")
    return to_l2 is not None and ideal is not None and ideal > 0 and to_l2 <= ideal


def _access(signal: str, kind: str) -> Callable[[Metrics], Outcome]:
    def rule(m: Metrics) -> Outcome:
        bps = g(m, f"bytes_per_sector_global_{kind}")
        th = thr(signal, "bytes_per_sector")
        if bps is not None and bps > 0:
            if bps >= th or _absorbed_by_l1(m):
                return None
            waste, traffic = 1 - bps / 32, traffic_share(m, kind)
            return fire(signal, waste * traffic * mem_w(m), (f"smsp__sass_average_data_bytes_per_sector_mem_global_op_{kind}.ratio", bps, f"< {th:g} of 32"),
                         (f"l1tex__t_sectors_pipe_lsu_mem_global_op_{kind}.sum share of global sectors", traffic, None), ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", mem_w(m) * 100, None))
        if kind == "ld" and (ex := g(m, "l2_excessive_sectors")) is not None and (tot := g(m, "l2_theoretical_sectors_global")):
            share = ex / tot
            return fire(signal, share * mem_w(m), ("derived__memory_l2_theoretical_sectors_global_excessive / memory_l2_theoretical_sectors_global", share, thr(signal, "excessive_share"))) \
                if share >= thr(signal, "excessive_share") else None
        return Missing(signal=signal, metrics=[f"bytes_per_sector_global_{kind}"])
    rule.__name__ = signal.replace("-", "_")
    return rule


uncoalesced_global = _access("uncoalesced-global", "ld")
sparse_stores = _access("sparse-stores", "st")


def smem_bank_conflicts(m: Metrics) -> Outcome:
    """Bank conflicts as a share of shared-memory wavefronts, weighted by the MIO stalls they cause."""
    c = [g(m, "smem_conflicts_ld"), g(m, "smem_conflicts_st")]
    w = [g(m, "smem_wavefronts_ld"), g(m, "smem_wavefronts_st")]
    if None in c or None in w:
        c, w = [g(m, "smem_conflicts")], [g(m, "smem_wavefronts")]
    if None in c or None in w:
        return Missing(signal="smem-bank-conflicts", metrics=["smem_conflicts_ld", "smem_wavefronts_ld"])
    conflicts, waves = sum(c), sum(w)  # type: ignore[arg-type]
    if waves <= 0:
        return None
    frac, th = conflicts / waves, thr("smem-bank-conflicts", "conflict_share")
    if frac < th:
        return None
    shares = stall_shares(m)
    stall = shares.get("mio_throttle", 0.0) + shares.get("short_scoreboard", 0.0) if shares else 0.4
    return fire("smem-bank-conflicts", frac * max(stall, 0.3), ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum / l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum", frac, th),
                 ("stall share mio_throttle + short_scoreboard", stall, None))


def long_scoreboard(m: Metrics) -> Outcome:
    """L1TEX-latency stalls; at stake only while DRAM bandwidth is not saturated."""
    s = share(m, "long_scoreboard")
    if s is None:
        return Missing(signal="long-scoreboard", metrics=["stall_long_scoreboard"])
    th = thr("long-scoreboard", "stall_share")
    if s < th:
        return None
    dram = g(m, "dram_throughput_pct") or 0.0
    return fire("long-scoreboard", s * (1 - min(100.0, dram) / 100), ("stall share long_scoreboard (smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio / all reasons)", s, th),
                 ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", dram, None, "latency matters while DRAM is not saturated"))


mio_throttle = stall_rule("mio-throttle", "mio_throttle")
short_scoreboard = stall_rule("short-scoreboard", "short_scoreboard")
lg_throttle = stall_rule("lg-throttle", "lg_throttle")
membar_stalls = stall_rule("membar-stalls", "membar")
math_pipe_throttle = stall_rule("math-pipe-throttle", "math_pipe_throttle", lambda m: 0.6)


def barrier_stalls(m: Metrics) -> Outcome:
    """Barrier share of stalls above threshold and the largest of the barrier/MIO family."""
    shares = stall_shares(m)
    if not shares:
        return Missing(signal="barrier-stalls", metrics=["stall_barrier"])
    s, th = shares.get("barrier", 0.0), thr("barrier-stalls", "stall_share")
    if s < th or s < max(shares.get("short_scoreboard", 0.0), shares.get("mio_throttle", 0.0)):
        return None
    return fire("barrier-stalls", s * latency_w(m), ("stall share barrier (smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio / all reasons)", s, th))


def instruction_fetch_stalls(m: Metrics) -> Outcome:
    """no_instruction stalls in a kernel long enough that a cold instruction cache does not explain them."""
    s = share(m, "no_instruction")
    if s is None:
        return Missing(signal="instruction-fetch-stalls", metrics=["stall_no_instruction"])
    th, dur = thr("instruction-fetch-stalls", "stall_share"), g(m, "duration")
    if s < th or (dur is not None and dur < thr("instruction-fetch-stalls", "min_duration_ns")):
        return None
    return fire("instruction-fetch-stalls", s * latency_w(m), ("stall share no_instruction (smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio / all reasons)", s, th))


def dram_bound(m: Metrics) -> Outcome:
    """DRAM throughput high and above compute; magnitude scaled by the useful share of each sector."""
    dram = g(m, "dram_throughput_pct")
    if dram is None:
        return Missing(signal="dram-bound", metrics=["dram_throughput_pct"])
    th, sm = thr("dram-bound", "dram_pct"), g(m, "sm_throughput_pct")
    if dram < th or (sm is not None and sm > dram):
        return None
    eff = sector_efficiency(m)
    shares = stall_shares(m)
    sat = max(0.0, min(1.0, (dram - th) / (thr("dram-bound", "saturated_pct") - th)))
    memstall = sum(shares.get(r, 0.0) for r in ("long_scoreboard", "lg_throttle", "tex_throttle", "drain")) if shares else 1.0
    w = max(sat, min(1.0, memstall))
    return fire("dram-bound", dram / 100 * eff * w, ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", dram, th), ("useful bytes per sector / 32 (smsp__sass_average_data_bytes_per_sector_mem_global_op_*.ratio)", eff, None),
                 ("stall share long_scoreboard + lg_throttle + tex_throttle + drain, or DRAM saturation", w, None))


def _l2_served(m: Metrics) -> tuple[str, float] | None:
    """The share (%) of the L1/TEX traffic at L2 that L2 serves without DRAM: read hits over reads and writes. A
    write-back L2 allocates every write, so writes 'hit' (99.99% in a GEMM writing 512 MB) and still all go to DRAM;
    ``lts__t_sector_hit_rate`` counts them as served. Falls back to that hit rate where the sector counts are absent."""
    rd, hits, wr = g(m, "l2_tex_read_sectors"), g(m, "l2_tex_read_hit_sectors"), g(m, "l2_tex_write_sectors")
    if rd is not None and hits is not None and wr is not None and rd + wr > 0:
        return "read hits / (reads + writes) of lts__t_sectors_srcunit_tex (%)", 100 * hits / (rd + wr)
    hit = g(m, "l2_hit_rate")
    return None if hit is None else ("lts__t_sector_hit_rate.pct", hit)


def l2_bound(m: Metrics) -> Outcome:
    l2, dram, served = g(m, "l2_throughput_pct"), g(m, "dram_throughput_pct"), _l2_served(m)
    if l2 is None or served is None:
        return Missing(signal="l2-bound", metrics=["l2_throughput_pct", "l2_hit_rate"])
    th, hth = thr("l2-bound", "l2_pct"), thr("l2-bound", "l2_hit_rate")
    if l2 < th or served[1] < hth or (dram is not None and dram >= l2):
        return None
    return fire("l2-bound", l2 / 100, ("lts__throughput.avg.pct_of_peak_sustained_elapsed", l2, th), (served[0], served[1], hth))


def cache_thrashing(m: Metrics) -> Outcome:
    """Needs the unique bytes the kernel must read (not in an ncu export) to tell re-reads from streaming."""
    rd, uniq, hit = g(m, "dram_bytes_read"), g(m, "unique_bytes"), g(m, "l2_hit_rate")
    if rd is None or uniq is None or hit is None or uniq <= 0:
        return Missing(signal="cache-thrashing", metrics=[k for k in ("dram_bytes_read", "unique_bytes", "l2_hit_rate") if g(m, k) is None])
    reuse, hth = rd / uniq, thr("cache-thrashing", "l2_hit_rate")
    if reuse < thr("cache-thrashing", "reuse") or hit >= hth:
        return None
    dram = g(m, "dram_throughput_pct") or 50.0
    return fire("cache-thrashing", (1 - 1 / reuse) * dram / 100, ("dram__bytes_read.sum / unique bytes", reuse, thr("cache-thrashing", "reuse")),
                 ("lts__t_sector_hit_rate.pct", hit, hth))


def fma_bound(m: Metrics) -> Outcome:
    fma = g(m, "pipe_fma_cycles_pct")
    fma = g(m, "pipe_fma_inst_pct") if fma is None else fma
    if fma is None:
        return Missing(signal="fma-bound", metrics=["pipe_fma_cycles_pct"])
    th = thr("fma-bound", "fma_pct")
    if fma < th:
        return None
    tpi = g(m, "threads_per_inst") or 32.0
    return fire("fma-bound", thr("fma-bound", "weight") * fma / 100 * min(1.0, tpi / 32), ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", fma, th),
                 ("smsp__thread_inst_executed_per_inst_executed.ratio", tpi, None, "lanes idle by divergence do no useful FMA work"))


#: How the tensor pipe's share (``rulebase.tensor_pct``) is named in evidence.
TENSOR_EVIDENCE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active (max over tensor pipes)"


def tensor_pipe_bound(m: Metrics) -> Outcome:
    t = tensor_pct(m)
    if t is None:
        return Missing(signal="tensor-pipe-bound", metrics=["pipe_tensor_cycles_pct"])
    th = thr("tensor-pipe-bound", "tensor_pct")
    return fire("tensor-pipe-bound", 0.6 * t / 100, (TENSOR_EVIDENCE, t, th)) if t >= th else None


def tensor_pipe_underused(m: Metrics) -> Outcome:
    """The tensor pipe under half busy in a kernel that uses it. On sm_90 a kernel with no wgmma instruction
    (``sm__inst_executed_pipe_tensor_op_gmma`` = 0, a gh100-only counter) issues mma.sync, whose ops path peaks at two
    thirds of the chip's tensor rate: its pipe share is read against the chip's peak."""
    t = tensor_pct(m)
    if t is None:
        return Missing(signal="tensor-pipe-underused", metrics=["pipe_tensor_cycles_pct"])
    th, lo = thr("tensor-pipe-underused", "tensor_pct"), thr("tensor-pipe-underused", "min_tensor_pct")
    fma = g(m, "pipe_fma_cycles_pct")
    if g(m, MATMUL_NAMED) == 1.0 and t < lo and fma is not None and fma >= thr("fma-bound", "fma_pct"):
        # a matrix product on CUDA cores: the FMA pipe's busy time, less the 1/ratio the tensor pipe would need
        ratio = thr("tensor-pipe-underused", "tf32_over_fp32")
        return fire("tensor-pipe-underused", fma / 100 * (1 - 1 / ratio),
                    (TENSOR_EVIDENCE, t, f"< {lo:g}"),
                    (FMA_MATMUL, fma, None, f"the kernel's name says it is a matrix product and it runs on the FP32 FMA pipe; "
                     f"TF32 tensor cores run {ratio:g}x its rate (bf16/FP8 more): allow TF32 (torch.backends.cuda.matmul."
                     "allow_tf32 = True) or use lower-precision inputs where the accuracy allows"))
    mma_sync = g(m, "tensor_gmma_inst_pct") == 0 and t >= lo
    eff = t * thr("tensor-pipe-underused", "hmma_path_peak") if mma_sync else t
    if not lo <= eff < th:
        return None
    ev: list[tuple[str, Any, Any] | tuple[str, Any, Any, str]] = [
        (TENSOR_EVIDENCE, t, f"{lo:g}..{th:g}")]
    if mma_sync:
        ev.append(("sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active", 0.0, None,
                   f"no wgmma on sm_90: mma.sync, whose path peaks at two thirds of the tensor rate; {eff:.0f}% of the chip's tensor peak "
                   "(wgmma with TMA and warp specialization reads operands from shared memory)"))
    return fire("tensor-pipe-underused", 0.5 * (1 - eff / 100), *ev)


def register_spilling(m: Metrics) -> Outcome:
    """Local-memory traffic (spills, local arrays) relative to global traffic."""
    local = [g(m, k) for k in ("local_ld_sectors", "local_st_sectors")]
    glob = g(m, "global_ld_sectors")
    th = thr("register-spilling", "local_share")
    if None not in local and glob is not None:
        loc = sum(local)  # type: ignore[arg-type]
        if loc <= 0 or local[0] < th * glob:  # type: ignore[operator]
            return None
        frac = loc / (loc + glob + (g(m, "global_st_sectors") or 0.0))
    elif (pct := g(m, "spill_requests_pct")) is not None:
        frac = pct / 100
        if frac < th:
            return None
    else:
        return Missing(signal="register-spilling", metrics=["local_ld_sectors", "local_st_sectors", "global_ld_sectors"])
    shares = stall_shares(m)
    w = max(mem_w(m), shares.get("lg_throttle", 0.0) + shares.get("long_scoreboard", 0.0) if shares else 0.0, 0.3)
    return fire("register-spilling", frac * w, ("l1tex__t_sectors_pipe_lsu_mem_local_op_{ld,st}.sum share of L1 sectors", frac, th), ("max(memory throughput, stall share lg_throttle + long_scoreboard)", w, None))


LIMIT_NAMES = {"occ_limit_registers": "launch__occupancy_limit_registers", "occ_limit_shared_mem": "launch__occupancy_limit_shared_mem",
               "occ_limit_warps": "launch__occupancy_limit_warps", "occ_limit_blocks": "launch__occupancy_limit_blocks"}


def _occupancy(signal: str, limiter_keys: tuple[str, ...]) -> Callable[[Metrics], Outcome]:
    def rule(m: Metrics) -> Outcome:
        theo = g(m, "theoretical_occupancy")
        lims = {k: v for k in ("occ_limit_registers", "occ_limit_shared_mem", "occ_limit_warps", "occ_limit_blocks")
                if (v := g(m, k)) is not None}
        if g(m, "smem_static") == 0 and g(m, "smem_dynamic") == 0:  # only the driver's reservation: not the kernel's limit
            lims.pop("occ_limit_shared_mem", None)
        if theo is None or len(lims) < 2:
            return Missing(signal=signal, metrics=["theoretical_occupancy", "occ_limit_registers", "occ_limit_shared_mem", "occ_limit_warps"])
        th = thr(signal, "theoretical_pct")
        limiter = min(lims, key=lambda k: (lims[k], ("occ_limit_registers", "occ_limit_shared_mem", "occ_limit_blocks", "occ_limit_warps").index(k)))
        if theo > th or limiter not in limiter_keys:
            return None
        issue = g(m, "issue_active_pct")
        w = 0.5 if issue is None else 1 - min(100.0, issue) / 100
        return fire(signal, (1 - theo / 100) * w, ("sm__maximum_warps_per_active_cycle_pct", theo, th), (LIMIT_NAMES[limiter], lims[limiter], "smallest block limit"),
                     ("1 - smsp__issue_active.avg.pct_of_peak_sustained_active", w, None))
    rule.__name__ = signal.replace("-", "_")
    return rule


occupancy_registers = _occupancy("occupancy-registers", ("occ_limit_registers",))
occupancy_shared_memory = _occupancy("occupancy-shared-memory", ("occ_limit_shared_mem",))
occupancy_block_size = _occupancy("occupancy-block-size", ("occ_limit_blocks", "occ_limit_warps"))


def warp_divergence(m: Metrics) -> Outcome:
    tpi, uni = g(m, "threads_per_inst"), g(m, "branch_uniform_pct")
    if tpi is None and uni is None:
        return Missing(signal="warp-divergence", metrics=["threads_per_inst"])
    busy = max(g(m, "issue_active_pct") or 0.0, g(m, "sm_throughput_pct") or 0.0) or 70.0
    th = thr("warp-divergence", "threads_per_inst")
    if tpi is not None:
        return fire("warp-divergence", (1 - tpi / 32) * busy / 100, ("smsp__thread_inst_executed_per_inst_executed.ratio", tpi, f"< {th:g}"),
                     ("max(issue active %, sm__throughput %)", busy, None)) if tpi < th else None
    return fire("warp-divergence", 0.5 * (1 - uni / 100) * busy / 100, ("smsp__sass_average_branch_targets_threads_uniform.pct", uni, "< 90")) if uni < 90 else None  # type: ignore[operator]


def atomic_contention(m: Metrics) -> Outcome:
    """Atomic/reduction sectors a large share of the SMs' L2 traffic while no unit is busy (serialization).

    The share is read over the sectors L1/TEX sends to L2 (``lts__t_sectors_srcunit_tex``), where the atomics come
    from: ``lts__t_sectors`` also counts the L2 fabric's crossings between the two L2 partitions of H100/H200 and the
    constant cache, which dilute it (scatter_add_ into 8 bins: 24% of all L2 sectors, 37% of the SMs' own)."""
    tex = [v for k in ("l2_tex_red_sectors", "l2_tex_atom_sectors") if (v := g(m, k)) is not None]
    every = [v for k in ("l2_sectors_red", "l2_sectors_atom") if (v := g(m, k)) is not None]
    from_l1, total = g(m, "l2_sectors_from_l1"), g(m, "l2_sectors")
    if tex and from_l1:
        a, total, over = sum(tex), from_l1, "lts__t_sectors_srcunit_tex_op_{red,atom}.sum / lts__t_sectors_srcunit_tex.sum"
    elif (tex or every) and total is not None:
        a, over = max(sum(tex), sum(every)), "lts__t_sectors[_srcunit_tex]_op_{red,atom}.sum / lts__t_sectors.sum"
    else:
        return _atomics_inferred(m) or Missing(signal="atomic-contention", metrics=["l2_tex_red_sectors", "l2_tex_atom_sectors", "l2_sectors"])
    share, th = (a / total if total > 0 else 0.0), thr("atomic-contention", "atomic_share")
    if share < th:
        return None
    busy = max(g(m, "sm_throughput_pct") or 0.0, g(m, "memory_throughput_pct") or 0.0)
    idle = thr("atomic-contention", "inferred_idle_pct")
    if busy < idle:  # every unit idles while atomics are a large share of L2 traffic: the launch is serialized on them
        return fire("atomic-contention", 1 - busy / 100, (over, share, th),
                    ("max(sm__throughput, gpu__compute_memory_throughput) %", busy, f"< {idle:g}",
                     "every unit idle with many atomics = serialized on them: the idle time is at stake"))
    return fire("atomic-contention", share * max(0.5, 1 - busy / 100), (over, share, th),
                 ("max(sm__throughput, gpu__compute_memory_throughput) %", busy, None, "low throughput with many atomics = serialization"))


def _atomics_inferred(m: Metrics) -> Fired | None:
    """Without the L2 atomic counters (a details page, a partial section set): a long launch whose warps wait in
    ``drain`` (for their memory operations to retire) while every unit idles is what serialized atomics look like."""
    drain, busy = share(m, "drain"), max(g(m, "sm_throughput_pct") or 0.0, g(m, "memory_throughput_pct") or 0.0)
    dur, issue = g(m, "duration"), g(m, "issue_active_pct")
    th = thr("atomic-contention", "inferred_drain_share")
    if drain is None or drain < th or busy >= thr("atomic-contention", "inferred_idle_pct") or dur is None or dur < thr("launch-overhead", "duration_ns"):
        return None
    f = fire("atomic-contention", drain * 0.8, ("stall share drain (smsp__average_warps_issue_stalled_drain_per_issue_active.ratio / all reasons)", drain, th),
             ("max(sm__throughput, gpu__compute_memory_throughput) %", busy, f"< {thr('atomic-contention', 'inferred_idle_pct'):g}"),
             ("smsp__issue_active.avg.pct_of_peak_sustained_active", issue if issue is not None else "absent", None))
    f.evidence.append(Evidence(metric="inferred", value="without lts__t_sectors_srcunit_tex_op_{red,atom}.sum", threshold=None,
                               note="the L2 atomic counters are missing (MemoryWorkloadAnalysis_Tables); capture them to confirm"))
    return f


def launch_overhead(m: Metrics) -> Outcome:
    """Kernels of a few microseconds; stronger evidence when the export holds several such launches."""
    dur = g(m, "duration")
    if dur is None:
        return Missing(signal="launch-overhead", metrics=["duration"])
    th, cost = thr("launch-overhead", "duration_ns"), thr("launch-overhead", "launch_cost_ns")
    if dur >= th or dur <= 0:
        return None
    n = g(m, "export_short_launches") or 1.0
    mag = cost / (cost + dur) * (1.0 if n >= 2 else 0.5)
    return fire("launch-overhead", mag, ("gpu__time_duration.sum (ns)", dur, th), ("short launches in this export", n, ">= 2 for full weight"))


def low_ipc(m: Metrics) -> Outcome:
    """Schedulers mostly idle on dependent-instruction latency (wait, dispatch, branch) with no unit busy."""
    issue = g(m, "issue_active_pct")
    if issue is None:
        return Missing(signal="low-ipc", metrics=["issue_active_pct"])
    th, sol = thr("low-ipc", "issue_pct"), thr("low-ipc", "both_sol_pct")
    busy = max(g(m, "sm_throughput_pct") or 0.0, g(m, "memory_throughput_pct") or 0.0)
    if issue >= th or busy >= sol:
        return None
    shares = stall_shares(m)
    dep = sum(shares.get(r, 0.0) for r in ("wait", "dispatch_stall", "misc", "branch_resolving")) if shares else 0.3
    mag = (1 - issue / 100) * dep
    return fire("low-ipc", mag, ("smsp__issue_active.avg.pct_of_peak_sustained_active", issue, th), ("max(sm__throughput, gpu__compute_memory_throughput) %", busy, sol),
                 ("stall share wait + dispatch_stall + misc + branch_resolving", dep, None)) if mag >= 0.05 else None


def speed_of_light(m: Metrics) -> Outcome:
    """A unit at >= 80% of its peak over the elapsed time. Magnitude here is that share of peak, not a share
    at stake: :func:`kwiki.profiling.verdict.judge` keeps the signal (first) only when no waste signal fired."""
    sm, mem = g(m, "sm_throughput_pct"), g(m, "memory_throughput_pct")
    if sm is None and mem is None:
        return Missing(signal="speed-of-light", metrics=["sm_throughput_pct", "memory_throughput_pct"])
    th = thr("speed-of-light", "sol_pct")
    best_name, best = max((("sm__throughput.avg.pct_of_peak_sustained_elapsed", sm or 0.0),
                           ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", mem or 0.0)), key=lambda x: x[1])
    return fire("speed-of-light", best / 100, (best_name, best, f">= {th:g}")) if best >= th else None


RULES: dict[str, Callable[[Metrics], Outcome]] = {
    "small-grid": small_grid, "tail-effect": tail_effect, "load-imbalance": load_imbalance,
    "uncoalesced-global": uncoalesced_global, "sparse-stores": sparse_stores, "smem-bank-conflicts": smem_bank_conflicts,
    "long-scoreboard": long_scoreboard, "mio-throttle": mio_throttle, "short-scoreboard": short_scoreboard,
    "lg-throttle": lg_throttle, "dram-bound": dram_bound, "l2-bound": l2_bound, "cache-thrashing": cache_thrashing,
    "fma-bound": fma_bound, "tensor-pipe-bound": tensor_pipe_bound, "tensor-pipe-underused": tensor_pipe_underused,
    "register-spilling": register_spilling, "occupancy-registers": occupancy_registers,
    "occupancy-shared-memory": occupancy_shared_memory, "occupancy-block-size": occupancy_block_size,
    "warp-divergence": warp_divergence, "barrier-stalls": barrier_stalls, "atomic-contention": atomic_contention,
    "instruction-fetch-stalls": instruction_fetch_stalls, "launch-overhead": launch_overhead,
    "membar-stalls": membar_stalls, "math-pipe-throttle": math_pipe_throttle, "low-ipc": low_ipc,
    "speed-of-light": speed_of_light,
}
assert set(RULES) == set(SIGNAL_IDS)


def evaluate(metrics: Metrics, messages: Iterable[Any] = (), context: Mapping[str, float] | None = None) -> Evaluation:
    """Run every rule; fill Missing signals from rule messages; damp explained symptoms; rank by magnitude."""
    msgs = list(messages)
    m: dict[str, float] = {k: float(v) for k, v in metrics.items() if g(metrics, k) is not None}
    for k, v in derive_metrics(msgs).items():
        m.setdefault(k, v)
    m.update(context or {})
    fired: dict[str, Fired] = {}
    missing: dict[str, Missing] = {}
    for sig, rule in RULES.items():
        try:
            out = rule(m)
        except (ArithmeticError, ValueError, TypeError):
            out = None
        if isinstance(out, Fired):
            fired[sig] = out
        elif isinstance(out, Missing):
            missing[sig] = out
    for hit in message_hits(msgs):
        sig = hit["signal"]
        mag = hit["magnitude"] * (mem_w(m) if sig in ("uncoalesced-global", "sparse-stores") else 1.0)
        if sig in missing and (sig not in fired or mag > fired[sig].magnitude):
            fired[sig] = Fired(signal=sig, magnitude=clip(mag), source="rule-message",
                               evidence=[Evidence(metric=f"ncu rule {hit['rule']}", value=hit["text"], threshold=None)])
    for sig in fired:
        missing.pop(sig, None)
    defs = load_signals()
    for cause, f in sorted(fired.items(), key=lambda x: -x[1].magnitude):
        for sym in defs[cause].explains:
            s = fired.get(sym)
            if s is not None and s is not f and f.magnitude >= 0.5 * s.magnitude and not any(e.metric == "explained by" for e in s.evidence):
                s.magnitude = clip(s.magnitude * 0.5)
                s.evidence.append(Evidence(metric="explained by", value=cause, threshold=None, note="symptom of a stronger cause; ranked lower"))
    order = {s: i for i, s in enumerate(SIGNAL_IDS)}
    ranked = sorted(fired.values(), key=lambda f: (-f.magnitude, order[f.signal]))
    # a diagnosis is partial for want of counters a capture can add; a value only the user can supply (unique_bytes:
    # a metric of the catalog with no ncu name) leaves its signal not evaluated, not the export partial
    capturable = load_catalog().capturable
    gaps = sorted({k for miss in missing.values() for k in miss.metrics if k in capturable})
    ranked, verdict = judge(ranked, m, gaps)
    return Evaluation(fired=ranked, missing=list(missing.values()), stall_shares={k: round(v, 4) for k, v in stall_shares(m).items()},
                      verdict=verdict)
