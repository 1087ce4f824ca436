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

from pydantic import BaseModel, Field

from .messages import derive_metrics, message_hits
from .signals import SIGNAL_IDS, load_signals

Metrics = Mapping[str, float]

STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
                 "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
                 "short_scoreboard", "sleeping", "tex_throttle", "wait", "gmma", "warpgroup_arrive")
_FAMILIES = ("", "_samples", "_cycles", "_pct")


class Evidence(BaseModel):
    metric: str
    value: float | str
    threshold: float | str | None = None
    note: str = ""


class Fired(BaseModel):
    signal: str
    magnitude: float
    evidence: list[Evidence] = Field(default_factory=list)
    source: str = "metrics"


class Missing(BaseModel):
    signal: str
    metrics: list[str]


class Evaluation(BaseModel):
    fired: list[Fired] = Field(default_factory=list)
    missing: list[Missing] = Field(default_factory=list)
    stall_shares: dict[str, float] = Field(default_factory=dict)


Outcome = Fired | Missing | None


# ------------------------------------------------------------------ helpers
def _g(m: Metrics, key: str) -> float | None:
    v = m.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _th(signal: str, name: str) -> float:
    return load_signals()[signal].threshold(name)


def _clip(x: float) -> float:
    return round(max(0.0, min(1.0, x)), 4)


def _fire(signal: str, mag: float, *ev: tuple[str, Any, Any] | tuple[str, Any, Any, str]) -> Fired:
    return Fired(signal=signal, magnitude=_clip(mag), evidence=[
        Evidence(metric=e[0], value=round(e[1], 4) if isinstance(e[1], float) else e[1], threshold=e[2],
                 note=e[3] if len(e) > 3 else "") for e in ev])


def stall_shares(m: Metrics) -> dict[str, float]:
    """Share of each stall reason in the warp stall total (``selected`` excluded), from the best series present."""
    best: dict[str, float] = {}
    for fam in _FAMILIES:
        vals = {r: v for r in STALL_REASONS if (v := _g(m, f"stall_{r}{fam}")) is not None and v >= 0}
        if len(vals) >= 3 and len(vals) > len(best):
            best = vals
    total = sum(v for r, v in best.items() if r != "selected")
    if best and total > 0:
        return {r: v / total for r, v in best.items() if r != "selected"}
    return {k[6:-6]: float(v) for k, v in m.items() if k.startswith("stall_") and k.endswith("_share") and _g(m, k) is not None}


def _share(m: Metrics, reason: str) -> float | None:
    shares = stall_shares(m)
    if not shares:
        return None
    return shares.get(reason, 0.0)


def _latency_w(m: Metrics) -> float:
    """0.5..1: how much stalls cost; issue-bound kernels hide them (0.5), idle schedulers expose them (1)."""
    issue = _g(m, "issue_active_pct")
    return 0.75 if issue is None else 0.5 + 0.5 * (1 - min(100.0, issue) / 100)


def _stall_rule(signal: str, reason: str, weight: Callable[[Metrics], float] = _latency_w) -> Callable[[Metrics], Outcome]:
    def rule(m: Metrics) -> Outcome:
        s = _share(m, reason)
        if s is None:
            return Missing(signal=signal, metrics=[f"stall_{reason}"])
        th = _th(signal, "stall_share")
        if s < th:
            return None
        return _fire(signal, s * weight(m), (f"stall_{reason} share", s, th))
    rule.__name__ = signal.replace("-", "_")
    rule.__doc__ = f"{signal}: stall '{reason}' share of all warp stalls >= threshold."
    return rule


def _traffic(m: Metrics, kind: str) -> float:
    ld, st = _g(m, "global_ld_sectors"), _g(m, "global_st_sectors")
    if ld is None or st is None or ld + st <= 0:
        return 1.0
    return (ld if kind == "ld" else st) / (ld + st)


def _mem_w(m: Metrics) -> float:
    v = _g(m, "memory_throughput_pct")
    v = _g(m, "dram_throughput_pct") if v is None else v
    return 0.5 if v is None else min(100.0, v) / 100


def _sector_efficiency(m: Metrics) -> float:
    effs = []
    for kind in ("ld", "st"):
        bps = _g(m, f"bytes_per_sector_global_{kind}")
        if bps is not None and bps > 0:
            effs.append((_traffic(m, kind), min(32.0, bps) / 32))
    w = sum(t for t, _ in effs)
    return 1.0 if not effs or w <= 0 else sum(t * e for t, e in effs) / w


# ------------------------------------------------------------------ rules
def small_grid(m: Metrics) -> Outcome:
    """Fewer blocks than SMs: magnitude = share of SMs left idle."""
    grid, sms = _g(m, "grid_size"), _g(m, "sm_count")
    if grid is None or sms is None or sms <= 0:
        return Missing(signal="small-grid", metrics=["grid_size", "sm_count"])
    th = _th("small-grid", "grid_per_sm")
    if grid >= th * sms:
        return None
    return _fire("small-grid", 1 - grid / sms, ("launch__grid_size", grid, f"< launch__sm_count ({sms:g})"))


def _blocks_per_sm(m: Metrics) -> float | None:
    lims = [v for k in ("occ_limit_registers", "occ_limit_shared_mem", "occ_limit_warps", "occ_limit_blocks", "occ_limit_barriers")
            if (v := _g(m, k)) is not None and v > 0]
    return min(lims) if lims else None


def tail_effect(m: Metrics) -> Outcome:
    """At least one full wave plus a partial one: magnitude = idle share of the last wave over all waves."""
    grid, sms, bps = _g(m, "grid_size"), _g(m, "sm_count"), _blocks_per_sm(m)
    full_msg, part_msg = _g(m, "msg_full_waves"), _g(m, "msg_partial_blocks")
    if grid and sms and bps:
        wave = bps * sms
        full, rem = math.floor(grid / wave), grid - math.floor(grid / wave) * wave
    elif grid and full_msg and part_msg is not None and full_msg > 0:
        full, rem = int(full_msg), part_msg
        wave = (grid - rem) / full_msg
    elif (waves := _g(m, "waves_per_sm")) is not None:
        full, wave = math.floor(waves), 1.0
        rem = waves - full
    else:
        return Missing(signal="tail-effect", metrics=["grid_size", "sm_count", "occ_limit_warps", "waves_per_sm"])
    if full < 1 or rem <= 0 or wave <= 0 or full > _th("tail-effect", "max_full_waves"):
        return None
    fill = rem / wave
    mag = (1 - fill) / (full + 1)
    if mag < _th("tail-effect", "min_magnitude"):
        return None
    return _fire("tail-effect", mag, ("full waves", float(full), f"<= {_th('tail-effect', 'max_full_waves'):g}"),
                 ("last wave fill", fill, "< 1", f"{rem:g} of {wave:g} block slots"))


def load_imbalance(m: Metrics) -> Outcome:
    """Busiest SM much longer than the average, beyond what block-count quantization explains."""
    mx, avg = _g(m, "sm_active_cycles_max"), _g(m, "sm_active_cycles")
    if mx is None or avg is None or avg <= 0:
        return Missing(signal="load-imbalance", metrics=["sm_active_cycles_max", "sm_active_cycles"])
    grid, sms = _g(m, "grid_size"), _g(m, "sm_count")
    expected = 1.0
    if grid and sms:
        if grid < sms:
            return None  # small-grid's territory
        per = grid / sms
        expected = math.ceil(per) / per
    ratio = mx / avg / expected
    th = _th("load-imbalance", "max_over_avg")
    if ratio <= th:
        return None
    return _fire("load-imbalance", 1 - 1 / ratio, ("sm__cycles_active.max / avg", mx / avg, th, f"quantization alone explains {expected:.2f}"))


def _access(signal: str, kind: str) -> Callable[[Metrics], Outcome]:
    def rule(m: Metrics) -> Outcome:
        bps = _g(m, f"bytes_per_sector_global_{kind}")
        th = _th(signal, "bytes_per_sector")
        if bps is not None and bps > 0:
            if bps >= th:
                return None
            waste, traffic = 1 - bps / 32, _traffic(m, kind)
            return _fire(signal, waste * traffic * _mem_w(m), (f"bytes used per sector (global {kind})", bps, f"< {th:g} of 32"),
                         (f"share of global sectors that are {kind}", traffic, None), ("memory throughput %", _mem_w(m) * 100, None))
        if kind == "ld" and (ex := _g(m, "l2_excessive_sectors")) is not None and (tot := _g(m, "l2_theoretical_sectors_global")):
            share = ex / tot
            return _fire(signal, share * _mem_w(m), ("excessive L2 sectors share", share, _th(signal, "excessive_share"))) \
                if share >= _th(signal, "excessive_share") else None
        return Missing(signal=signal, metrics=[f"bytes_per_sector_global_{kind}"])
    rule.__name__ = signal.replace("-", "_")
    return rule


uncoalesced_global = _access("uncoalesced-global", "ld")
sparse_stores = _access("sparse-stores", "st")


def smem_bank_conflicts(m: Metrics) -> Outcome:
    """Bank conflicts as a share of shared-memory wavefronts, weighted by the MIO stalls they cause."""
    c = [_g(m, "smem_conflicts_ld"), _g(m, "smem_conflicts_st")]
    w = [_g(m, "smem_wavefronts_ld"), _g(m, "smem_wavefronts_st")]
    if None in c or None in w:
        c, w = [_g(m, "smem_conflicts")], [_g(m, "smem_wavefronts")]
    if None in c or None in w:
        return Missing(signal="smem-bank-conflicts", metrics=["smem_conflicts_ld", "smem_wavefronts_ld"])
    conflicts, waves = sum(c), sum(w)  # type: ignore[arg-type]
    if waves <= 0:
        return None
    frac, th = conflicts / waves, _th("smem-bank-conflicts", "conflict_share")
    if frac < th:
        return None
    shares = stall_shares(m)
    stall = shares.get("mio_throttle", 0.0) + shares.get("short_scoreboard", 0.0) if shares else 0.4
    return _fire("smem-bank-conflicts", frac * max(stall, 0.3), ("bank conflicts / shared wavefronts", frac, th),
                 ("mio_throttle + short_scoreboard share", stall, None))


def long_scoreboard(m: Metrics) -> Outcome:
    """L1TEX-latency stalls; at stake only while DRAM bandwidth is not saturated."""
    s = _share(m, "long_scoreboard")
    if s is None:
        return Missing(signal="long-scoreboard", metrics=["stall_long_scoreboard"])
    th = _th("long-scoreboard", "stall_share")
    if s < th:
        return None
    dram = _g(m, "dram_throughput_pct") or 0.0
    return _fire("long-scoreboard", s * (1 - min(100.0, dram) / 100), ("stall_long_scoreboard share", s, th),
                 ("DRAM throughput %", dram, None, "latency matters while DRAM is not saturated"))


mio_throttle = _stall_rule("mio-throttle", "mio_throttle")
short_scoreboard = _stall_rule("short-scoreboard", "short_scoreboard")
lg_throttle = _stall_rule("lg-throttle", "lg_throttle")
membar_stalls = _stall_rule("membar-stalls", "membar")
math_pipe_throttle = _stall_rule("math-pipe-throttle", "math_pipe_throttle", lambda m: 0.6)


def barrier_stalls(m: Metrics) -> Outcome:
    """Barrier share of stalls above threshold and the largest of the barrier/MIO family."""
    shares = stall_shares(m)
    if not shares:
        return Missing(signal="barrier-stalls", metrics=["stall_barrier"])
    s, th = shares.get("barrier", 0.0), _th("barrier-stalls", "stall_share")
    if s < th or s < max(shares.get("short_scoreboard", 0.0), shares.get("mio_throttle", 0.0)):
        return None
    return _fire("barrier-stalls", s * _latency_w(m), ("stall_barrier share", s, th))


def instruction_fetch_stalls(m: Metrics) -> Outcome:
    """no_instruction stalls in a kernel long enough that a cold instruction cache does not explain them."""
    s = _share(m, "no_instruction")
    if s is None:
        return Missing(signal="instruction-fetch-stalls", metrics=["stall_no_instruction"])
    th, dur = _th("instruction-fetch-stalls", "stall_share"), _g(m, "duration")
    if s < th or (dur is not None and dur < _th("instruction-fetch-stalls", "min_duration_ns")):
        return None
    return _fire("instruction-fetch-stalls", s * _latency_w(m), ("stall_no_instruction share", s, th))


def dram_bound(m: Metrics) -> Outcome:
    """DRAM throughput high and above compute; magnitude scaled by the useful share of each sector."""
    dram = _g(m, "dram_throughput_pct")
    if dram is None:
        return Missing(signal="dram-bound", metrics=["dram_throughput_pct"])
    th, sm = _th("dram-bound", "dram_pct"), _g(m, "sm_throughput_pct")
    if dram < th or (sm is not None and sm > dram):
        return None
    eff = _sector_efficiency(m)
    shares = stall_shares(m)
    sat = max(0.0, min(1.0, (dram - th) / (_th("dram-bound", "saturated_pct") - th)))
    memstall = sum(shares.get(r, 0.0) for r in ("long_scoreboard", "lg_throttle", "tex_throttle", "drain")) if shares else 1.0
    w = max(sat, min(1.0, memstall))
    return _fire("dram-bound", dram / 100 * eff * w, ("DRAM throughput %", dram, th), ("useful bytes per sector / 32", eff, None),
                 ("warps waiting on memory (share) or DRAM saturation", w, None))


def l2_bound(m: Metrics) -> Outcome:
    l2, dram, hit = _g(m, "l2_throughput_pct"), _g(m, "dram_throughput_pct"), _g(m, "l2_hit_rate")
    if l2 is None or hit is None:
        return Missing(signal="l2-bound", metrics=["l2_throughput_pct", "l2_hit_rate"])
    th, hth = _th("l2-bound", "l2_pct"), _th("l2-bound", "l2_hit_rate")
    if l2 < th or hit < hth or (dram is not None and dram >= l2):
        return None
    return _fire("l2-bound", l2 / 100, ("L2 throughput %", l2, th), ("L2 hit rate %", hit, hth))


def cache_thrashing(m: Metrics) -> Outcome:
    """Needs the unique bytes the kernel must read (not in an ncu export) to tell re-reads from streaming."""
    rd, uniq, hit = _g(m, "dram_bytes_read"), _g(m, "unique_bytes"), _g(m, "l2_hit_rate")
    if rd is None or uniq is None or hit is None or uniq <= 0:
        return Missing(signal="cache-thrashing", metrics=[k for k in ("dram_bytes_read", "unique_bytes", "l2_hit_rate") if _g(m, k) is None])
    reuse, hth = rd / uniq, _th("cache-thrashing", "l2_hit_rate")
    if reuse < _th("cache-thrashing", "reuse") or hit >= hth:
        return None
    dram = _g(m, "dram_throughput_pct") or 50.0
    return _fire("cache-thrashing", (1 - 1 / reuse) * dram / 100, ("dram bytes read / unique bytes", reuse, _th("cache-thrashing", "reuse")),
                 ("L2 hit rate %", hit, hth))


def fma_bound(m: Metrics) -> Outcome:
    fma = _g(m, "pipe_fma_cycles_pct")
    fma = _g(m, "pipe_fma_inst_pct") if fma is None else fma
    if fma is None:
        return Missing(signal="fma-bound", metrics=["pipe_fma_cycles_pct"])
    th = _th("fma-bound", "fma_pct")
    if fma < th:
        return None
    tpi = _g(m, "threads_per_inst") or 32.0
    return _fire("fma-bound", _th("fma-bound", "weight") * fma / 100 * min(1.0, tpi / 32), ("FMA pipe % of active cycles", fma, th),
                 ("active threads per instruction", tpi, None, "lanes idle by divergence do no useful FMA work"))


def _tensor(m: Metrics) -> float | None:
    vals = [v for k in ("pipe_tensor_cycles_pct", "pipe_tensor_gmma_cycles_pct", "pipe_tensor_hmma_cycles_pct", "pipe_tc_cycles_pct")
            if (v := _g(m, k)) is not None]
    return max(vals) if vals else None


def tensor_pipe_bound(m: Metrics) -> Outcome:
    t = _tensor(m)
    if t is None:
        return Missing(signal="tensor-pipe-bound", metrics=["pipe_tensor_cycles_pct"])
    th = _th("tensor-pipe-bound", "tensor_pct")
    return _fire("tensor-pipe-bound", 0.6 * t / 100, ("tensor pipe % of active cycles", t, th)) if t >= th else None


def tensor_pipe_underused(m: Metrics) -> Outcome:
    t = _tensor(m)
    if t is None:
        return Missing(signal="tensor-pipe-underused", metrics=["pipe_tensor_cycles_pct"])
    th, lo = _th("tensor-pipe-underused", "tensor_pct"), _th("tensor-pipe-underused", "min_tensor_pct")
    if not lo <= t < th:
        return None
    return _fire("tensor-pipe-underused", 0.5 * (1 - t / 100), ("tensor pipe % of active cycles", t, f"{lo:g}..{th:g}"))


def register_spilling(m: Metrics) -> Outcome:
    """Local-memory traffic (spills, local arrays) relative to global traffic."""
    local = [_g(m, k) for k in ("local_ld_sectors", "local_st_sectors")]
    glob = _g(m, "global_ld_sectors")
    th = _th("register-spilling", "local_share")
    if None not in local and glob is not None:
        loc = sum(local)  # type: ignore[arg-type]
        if loc <= 0 or local[0] < th * glob:  # type: ignore[operator]
            return None
        frac = loc / (loc + glob + (_g(m, "global_st_sectors") or 0.0))
    elif (pct := _g(m, "spill_requests_pct")) is not None:
        frac = pct / 100
        if frac < th:
            return None
    else:
        return Missing(signal="register-spilling", metrics=["local_ld_sectors", "local_st_sectors", "global_ld_sectors"])
    shares = stall_shares(m)
    w = max(_mem_w(m), shares.get("lg_throttle", 0.0) + shares.get("long_scoreboard", 0.0) if shares else 0.0, 0.3)
    return _fire("register-spilling", frac * w, ("local share of L1 sectors", frac, th), ("memory / LSU pressure", w, None))


def _occupancy(signal: str, limiter_keys: tuple[str, ...]) -> Callable[[Metrics], Outcome]:
    def rule(m: Metrics) -> Outcome:
        theo = _g(m, "theoretical_occupancy")
        lims = {k: v for k in ("occ_limit_registers", "occ_limit_shared_mem", "occ_limit_warps", "occ_limit_blocks")
                if (v := _g(m, k)) is not None}
        if theo is None or len(lims) < 2:
            return Missing(signal=signal, metrics=["theoretical_occupancy", "occ_limit_registers", "occ_limit_shared_mem", "occ_limit_warps"])
        th = _th(signal, "theoretical_pct")
        limiter = min(lims, key=lambda k: (lims[k], ("occ_limit_registers", "occ_limit_shared_mem", "occ_limit_blocks", "occ_limit_warps").index(k)))
        if theo > th or limiter not in limiter_keys:
            return None
        issue = _g(m, "issue_active_pct")
        w = 0.5 if issue is None else 1 - min(100.0, issue) / 100
        return _fire(signal, (1 - theo / 100) * w, ("theoretical occupancy %", theo, th), (limiter, lims[limiter], "smallest block limit"),
                     ("issue slots idle", w, None))
    rule.__name__ = signal.replace("-", "_")
    return rule


occupancy_registers = _occupancy("occupancy-registers", ("occ_limit_registers",))
occupancy_shared_memory = _occupancy("occupancy-shared-memory", ("occ_limit_shared_mem",))
occupancy_block_size = _occupancy("occupancy-block-size", ("occ_limit_blocks", "occ_limit_warps"))


def warp_divergence(m: Metrics) -> Outcome:
    tpi, uni = _g(m, "threads_per_inst"), _g(m, "branch_uniform_pct")
    if tpi is None and uni is None:
        return Missing(signal="warp-divergence", metrics=["threads_per_inst"])
    busy = max(_g(m, "issue_active_pct") or 0.0, _g(m, "sm_throughput_pct") or 0.0) or 70.0
    th = _th("warp-divergence", "threads_per_inst")
    if tpi is not None:
        return _fire("warp-divergence", (1 - tpi / 32) * busy / 100, ("active threads per instruction", tpi, f"< {th:g}"),
                     ("issue / SM busy %", busy, None)) if tpi < th else None
    return _fire("warp-divergence", 0.5 * (1 - uni / 100) * busy / 100, ("uniform branch targets %", uni, "< 90")) if uni < 90 else None  # type: ignore[operator]


def atomic_contention(m: Metrics) -> Outcome:
    """Atomic/reduction sectors a large share of L2 traffic while no unit is busy (serialization)."""
    atom = [v for k in ("l2_tex_red_sectors", "l2_tex_atom_sectors", "l2_sectors_red", "l2_sectors_atom") if (v := _g(m, k)) is not None]
    total = _g(m, "l2_sectors")
    if not atom or total is None:
        return Missing(signal="atomic-contention", metrics=["l2_tex_red_sectors", "l2_tex_atom_sectors", "l2_sectors"])
    a = max(sum(atom[:2]), sum(atom[2:]))
    share, th = (a / total if total > 0 else 0.0), _th("atomic-contention", "atomic_share")
    if share < th:
        return None
    busy = max(_g(m, "sm_throughput_pct") or 0.0, _g(m, "memory_throughput_pct") or 0.0)
    return _fire("atomic-contention", share * max(0.5, 1 - busy / 100), ("atomic+reduction share of L2 sectors", share, th),
                 ("busiest unit %", busy, None, "low throughput with many atomics = serialization"))


def launch_overhead(m: Metrics) -> Outcome:
    """Kernels of a few microseconds; stronger evidence when the export holds several such launches."""
    dur = _g(m, "duration")
    if dur is None:
        return Missing(signal="launch-overhead", metrics=["duration"])
    th, cost = _th("launch-overhead", "duration_ns"), _th("launch-overhead", "launch_cost_ns")
    if dur >= th:
        return None
    n = _g(m, "export_short_launches") or 1.0
    mag = cost / (cost + dur) * (1.0 if n >= 2 else 0.5)
    return _fire("launch-overhead", mag, ("gpu__time_duration (ns)", dur, th), ("short launches in this export", n, ">= 2 for full weight"))


def low_ipc(m: Metrics) -> Outcome:
    """Schedulers mostly idle on dependent-instruction latency (wait, dispatch, branch) with no unit busy."""
    issue = _g(m, "issue_active_pct")
    if issue is None:
        return Missing(signal="low-ipc", metrics=["issue_active_pct"])
    th, sol = _th("low-ipc", "issue_pct"), _th("low-ipc", "both_sol_pct")
    busy = max(_g(m, "sm_throughput_pct") or 0.0, _g(m, "memory_throughput_pct") or 0.0)
    if issue >= th or busy >= sol:
        return None
    shares = stall_shares(m)
    dep = sum(shares.get(r, 0.0) for r in ("wait", "dispatch_stall", "misc", "branch_resolving")) if shares else 0.3
    mag = (1 - issue / 100) * dep
    return _fire("low-ipc", mag, ("issue active %", issue, th), ("busiest unit %", busy, sol),
                 ("wait + dispatch + misc + branch_resolving share", dep, None)) if mag >= 0.05 else None


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
}
assert set(RULES) == set(SIGNAL_IDS)


def evaluate(metrics: Metrics, messages: Iterable[Any] = (), context: Mapping[str, float] | None = None) -> Evaluation:
    """Run every rule; fill Missing signals from rule messages; damp explained symptoms; rank by magnitude."""
    msgs = list(messages)
    m: dict[str, float] = {k: float(v) for k, v in metrics.items() if _g(metrics, k) is not None}
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
        mag = hit["magnitude"] * (_mem_w(m) if sig in ("uncoalesced-global", "sparse-stores") else 1.0)
        if sig in missing and (sig not in fired or mag > fired[sig].magnitude):
            fired[sig] = Fired(signal=sig, magnitude=_clip(mag), source="rule-message",
                               evidence=[Evidence(metric=f"ncu rule {hit['rule']}", value=hit["text"], threshold=None)])
    for sig in fired:
        missing.pop(sig, None)
    defs = load_signals()
    for cause, f in sorted(fired.items(), key=lambda x: -x[1].magnitude):
        for sym in defs[cause].explains:
            s = fired.get(sym)
            if s is not None and s is not f and f.magnitude >= 0.5 * s.magnitude and not any(e.metric == "explained by" for e in s.evidence):
                s.magnitude = _clip(s.magnitude * 0.5)
                s.evidence.append(Evidence(metric="explained by", value=cause, threshold=None, note="symptom of a stronger cause; ranked lower"))
    order = {s: i for i, s in enumerate(SIGNAL_IDS)}
    ranked = sorted(fired.values(), key=lambda f: (-f.magnitude, order[f.signal]))
    return Evaluation(fired=ranked, missing=list(missing.values()), stall_shares={k: round(v, 4) for k, v in stall_shares(m).items()})
