"""Pure-function tests of profiling/rules.py: each rule fires on a synthetic profile and stays quiet on a clean one."""

from __future__ import annotations

import pytest

from kwiki.profiling import rules
from kwiki.profiling.rulebase import FMA_MATMUL, MATMUL_NAMED
from kwiki.profiling.rules import RULES, Fired, Missing, evaluate, stall_shares
from kwiki.profiling.signals import SIGNAL_IDS
from kwiki.profiling.verdict import judge

REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
           "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
           "short_scoreboard", "sleeping", "tex_throttle", "wait")


def stalls(**shares: float) -> dict[str, float]:
    """Per-issue-active stall ratios whose shares (selected excluded) are ``shares``; the rest goes to not_selected."""
    out = {f"stall_{r}": 0.0 for r in REASONS}
    rest = 1.0 - sum(shares.values())
    out.update({f"stall_{k}": v * 10 for k, v in shares.items()})
    out["stall_not_selected"] += max(0.0, rest) * 10
    out["stall_selected"] = 1.0
    return out


#: a healthy, busy, well-shaped launch on a 132-SM GPU
CLEAN: dict[str, float] = {
    "grid_size": 1056.0, "sm_count": 132.0, "block_size": 256.0, "waves_per_sm": 1.0, "duration": 500_000.0,
    "occ_limit_registers": 8.0, "occ_limit_shared_mem": 16.0, "occ_limit_warps": 8.0, "occ_limit_blocks": 32.0,
    "theoretical_occupancy": 100.0, "achieved_occupancy": 90.0, "issue_active_pct": 60.0,
    "sm_throughput_pct": 55.0, "memory_throughput_pct": 50.0, "dram_throughput_pct": 45.0, "l2_throughput_pct": 50.0,
    "l2_hit_rate": 60.0, "pipe_fma_cycles_pct": 40.0, "pipe_tensor_cycles_pct": 0.5, "threads_per_inst": 32.0,
    "sm_active_cycles": 1000.0, "sm_active_cycles_max": 1050.0,
    "bytes_per_sector_global_ld": 32.0, "bytes_per_sector_global_st": 32.0, "global_ld_sectors": 1e6, "global_st_sectors": 5e5,
    "smem_conflicts_ld": 10.0, "smem_conflicts_st": 0.0, "smem_wavefronts_ld": 1e5, "smem_wavefronts_st": 1e5,
    "local_ld_sectors": 0.0, "local_st_sectors": 0.0, "l2_sectors": 2e6, "l2_tex_red_sectors": 100.0, "l2_tex_atom_sectors": 0.0,
    **stalls(long_scoreboard=0.2, wait=0.1),
}

#: signal -> overrides that make it fire
BAD: dict[str, dict[str, float]] = {
    "small-grid": {"grid_size": 32.0},
    "speed-of-light": {"sm_throughput_pct": 93.0, "pipe_tensor_cycles_pct": 95.0},
    "tail-effect": {"grid_size": 265.0, "occ_limit_warps": 2.0, "occ_limit_registers": 4.0},
    "load-imbalance": {"sm_active_cycles_max": 2000.0},
    "uncoalesced-global": {"bytes_per_sector_global_ld": 4.0, "memory_throughput_pct": 90.0},
    "sparse-stores": {"bytes_per_sector_global_st": 4.0, "global_st_sectors": 8e6, "memory_throughput_pct": 90.0},
    "smem-bank-conflicts": {"smem_conflicts_ld": 9e4, **stalls(mio_throttle=0.45)},
    "long-scoreboard": {**stalls(long_scoreboard=0.8), "dram_throughput_pct": 20.0},
    "mio-throttle": stalls(mio_throttle=0.5),
    "short-scoreboard": stalls(short_scoreboard=0.5),
    "lg-throttle": stalls(lg_throttle=0.5),
    "dram-bound": {"dram_throughput_pct": 90.0, "memory_throughput_pct": 90.0, "sm_throughput_pct": 20.0},
    "l2-bound": {"l2_throughput_pct": 90.0, "l2_hit_rate": 95.0, "dram_throughput_pct": 10.0},
    "cache-thrashing": {"dram_bytes_read": 4e9, "unique_bytes": 1e9, "l2_hit_rate": 20.0, "dram_throughput_pct": 80.0},
    "fma-bound": {"pipe_fma_cycles_pct": 90.0},
    "tensor-pipe-bound": {"pipe_tensor_cycles_pct": 92.0},
    "tensor-pipe-underused": {"pipe_tensor_cycles_pct": 30.0},
    "register-spilling": {"local_ld_sectors": 5e6, "local_st_sectors": 5e6},
    "occupancy-registers": {"occ_limit_registers": 2.0, "theoretical_occupancy": 25.0, "issue_active_pct": 20.0},
    "occupancy-shared-memory": {"occ_limit_shared_mem": 1.0, "theoretical_occupancy": 12.5, "issue_active_pct": 20.0},
    "occupancy-block-size": {"occ_limit_blocks": 1.0, "occ_limit_warps": 8.0, "theoretical_occupancy": 12.5, "issue_active_pct": 20.0},
    "warp-divergence": {"threads_per_inst": 16.0, "issue_active_pct": 95.0},
    "barrier-stalls": stalls(barrier=0.5),
    "atomic-contention": {"l2_tex_red_sectors": 1.5e6, "sm_throughput_pct": 1.0, "memory_throughput_pct": 1.0},
    "instruction-fetch-stalls": stalls(no_instruction=0.3),
    "launch-overhead": {"duration": 2400.0, "export_short_launches": 5.0},
    "membar-stalls": stalls(membar=0.4),
    "math-pipe-throttle": stalls(math_pipe_throttle=0.5),
    "low-ipc": {"issue_active_pct": 20.0, "sm_throughput_pct": 20.0, "memory_throughput_pct": 5.0, **stalls(wait=0.8)},
}


def test_every_signal_has_a_rule_and_a_case():
    assert set(RULES) == set(SIGNAL_IDS) == set(BAD)


@pytest.mark.parametrize("signal", SIGNAL_IDS)
def test_rule_quiet_on_clean_profile(signal):
    out = RULES[signal](CLEAN)
    if signal == "cache-thrashing":
        assert isinstance(out, Missing) and "unique_bytes" in out.metrics
    else:
        assert out is None, out


@pytest.mark.parametrize("signal", SIGNAL_IDS)
def test_rule_fires_on_bad_profile(signal):
    out = RULES[signal]({**CLEAN, **BAD[signal]})
    assert isinstance(out, Fired), out
    assert out.signal == signal
    assert 0 < out.magnitude <= 1
    assert out.evidence and all(e.metric for e in out.evidence)


@pytest.mark.parametrize("signal", SIGNAL_IDS)
def test_rule_reports_missing_metrics(signal):
    out = RULES[signal]({})
    assert isinstance(out, Missing) and out.metrics, (signal, out)


@pytest.mark.parametrize("signal", SIGNAL_IDS)
def test_bad_profile_ranks_its_signal_first_or_close(signal):
    ev = evaluate({**CLEAN, **BAD[signal]})
    names = [f.signal for f in ev.fired]
    assert signal in names[:3], (signal, [(f.signal, f.magnitude) for f in ev.fired])


def test_clean_profile_fires_nothing():
    assert evaluate(CLEAN).fired == []


def test_magnitudes_rank_sensibly():
    # a 94%-idle GPU outranks a mild tail; a 10x spill outranks the lg_throttle it causes
    ev = evaluate({**CLEAN, "grid_size": 8.0, **stalls(long_scoreboard=0.5)})
    assert ev.fired[0].signal == "small-grid"
    spill = evaluate({**CLEAN, "local_ld_sectors": 5e7, "local_st_sectors": 5e7, "memory_throughput_pct": 88.0, **stalls(lg_throttle=0.66)})
    assert spill.fired[0].signal == "register-spilling"
    lg = next(f for f in spill.fired if f.signal == "lg-throttle")
    assert any(e.metric == "explained by" for e in lg.evidence)


def test_stall_shares_pick_the_richest_series():
    m = {f"stall_{r}_samples": 1.0 for r in REASONS} | {"stall_barrier": 5.0}
    shares = stall_shares(m)
    assert set(shares) == set(REASONS) - {"selected"}
    assert abs(sum(shares.values()) - 1) < 1e-9
    assert stall_shares({}) == {}


def test_tail_effect_from_rule_message_only():
    msg = {"name": "LaunchConfiguration", "type": "OPT", "speedup": 50.0, "speedup_type": "global",
           "description": "This kernel launch results in 1 full waves and a partial wave of 1 thread blocks. "
                          "this partial wave may account for up to 50.0% of the total runtime of this kernel."}
    ev = evaluate({"grid_size": 265.0}, [msg])
    assert ev.fired[0].signal == "tail-effect"
    assert 0.45 < ev.fired[0].magnitude <= 0.5


def test_stall_share_from_cpistall_message():
    msg = {"name": "CPIStall", "type": "OPT", "description": "... waiting for sibling warps at a CTA barrier. "
           "This stall type represents about 51.3% of the total average of 25.0 cycles between issuing two instructions."}
    ev = evaluate({"issue_active_pct": 60.0}, [msg])
    assert ev.fired[0].signal == "barrier-stalls"


def test_message_fills_only_missing_signals():
    msg = {"name": "UncoalescedGlobalAccess", "type": "OPT", "speedup": 80.0, "description":
           "This kernel has uncoalesced global accesses resulting in a total of 100 excessive sectors (78% of the total 128 sectors)."}
    # metrics say loads are perfectly coalesced: the metric rule wins over the message
    ev = evaluate({**CLEAN}, [msg])
    assert "uncoalesced-global" not in [f.signal for f in ev.fired]
    ev2 = evaluate({"memory_throughput_pct": 90.0}, [msg])
    assert ev2.fired[0].signal == "uncoalesced-global" and ev2.fired[0].source == "rule-message"


def test_garbage_values_do_not_crash():
    weird = {k: v for k, v in {"grid_size": float("nan"), "sm_count": 0.0, "duration": -1.0, "stall_wait": float("inf"),
                                "l2_sectors": 0.0, "l2_tex_red_sectors": 5.0, "smem_wavefronts_ld": 0.0, "smem_wavefronts_st": 0.0,
                                "smem_conflicts_ld": 3.0, "smem_conflicts_st": 0.0, "sm_active_cycles": 0.0,
                                "sm_active_cycles_max": 10.0}.items()}
    ev = evaluate(weird)  # type: ignore[arg-type]
    assert all(0 <= f.magnitude <= 1 for f in ev.fired)
    assert rules.small_grid({"grid_size": 1.0, "sm_count": 0.0}).__class__ is Missing


def test_a_handful_of_lsu_stores_in_a_tma_kernel_is_no_sparse_store_problem():
    # the stores' share is taken of all L1TEX->L2 traffic: a TMA kernel moves its tiles past the LSU counters
    tma = {"bytes_per_sector_global_st": 4.0, "global_ld_sectors": 0.0, "global_st_sectors": 1.0,
           "l2_sectors_from_l1": 9_000_000.0, "memory_throughput_pct": 60.0}
    f = RULES["sparse-stores"](tma)
    assert isinstance(f, Fired) and f.magnitude < 0.001
    lsu = dict(tma, global_st_sectors=16_000_000.0, global_ld_sectors=8_000_000.0, l2_sectors_from_l1=24_000_000.0)
    f = RULES["sparse-stores"](lsu)
    assert isinstance(f, Fired) and f.magnitude > 0.25


def test_an_access_pattern_whose_excess_hits_in_l1_costs_no_memory_traffic():
    base = {"bytes_per_sector_global_ld": 12.8, "global_ld_sectors": 42e6, "global_st_sectors": 4e6,
            "memory_throughput_pct": 55.0, "l2_theoretical_sectors_global_ideal": 21e6}
    assert RULES["uncoalesced-global"](dict(base, l2_sectors_from_l1=11.6e6)) is None  # fewer sectors to L2 than ideal
    assert isinstance(RULES["uncoalesced-global"](dict(base, l2_sectors_from_l1=30e6)), Fired)
    assert isinstance(RULES["uncoalesced-global"](base), Fired)  # without the counters: as before


def test_a_program_of_short_launches_leads_with_its_launch_overhead():
    from kwiki.profiling.ncu_csv import LaunchProfile
    from kwiki.profiling.program import rank_kernels, read_program
    durs = [13_000.0, 3_000.0, 3_000.0, 2_500.0, 3_500.0, 2_500.0]
    ps = [LaunchProfile(kernel=f"k{i}", launch_id=str(i), metrics={"duration": d}) for i, d in enumerate(durs)]
    ks = rank_kernels(ps)
    prog = read_program(ks, durs, {"k0": [("small-grid", 0.76)], "k1": [("launch-overhead", 0.5)]})
    assert prog is not None and prog.short_launches == 5
    assert prog.signals[0].signal == "launch-overhead" and prog.signals[0].kernel is None
    assert abs(prog.signals[0].magnitude - 5 * 3500 / (sum(durs) + 5 * 3500)) < 1e-3
    assert [s.signal for s in prog.signals].count("launch-overhead") == 1  # a kernel's own is counted program-wide
    # one long kernel: its own signal, weighed by its share of the wall time, leads
    long = [900_000.0, 3_000.0, 3_000.0]
    ps = [LaunchProfile(kernel=f"k{i}", launch_id=str(i), metrics={"duration": d}) for i, d in enumerate(long)]
    prog = read_program(rank_kernels(ps), long, {"k0": [("dram-bound", 0.8)]})
    assert prog is not None and prog.signals[0].signal == "dram-bound" and prog.signals[0].kernel == "k0"
    assert read_program(rank_kernels(ps[:1]), long[:1], {}) is None


def test_mma_sync_on_hopper_is_read_against_the_chips_tensor_peak():
    # sm_90's wgmma instruction counter at 0 with the tensor pipe 55% busy: mma.sync, whose path peaks at 2/3
    fa2 = {"pipe_tensor_hmma_cycles_pct": 55.0, "tensor_gmma_inst_pct": 0.0}
    f = RULES["tensor-pipe-underused"](fa2)
    assert isinstance(f, Fired) and any("mma.sync" in e.note for e in f.evidence)
    assert RULES["tensor-pipe-underused"](dict(fa2, tensor_gmma_inst_pct=4.8)) is None  # wgmma: 55% is over the bar
    assert RULES["tensor-pipe-underused"]({"pipe_tensor_hmma_cycles_pct": 55.0}) is None  # no sm_90 counter: as before


def test_a_matrix_product_on_the_fma_pipe_is_tensor_cores_unused():
    # cuBLAS fp32 with TF32 off: FMA pipe 80% busy, tensor pipe idle, and the kernel's name says it is a GEMM
    sgemm = {"pipe_fma_cycles_pct": 80.0, "pipe_tensor_cycles_pct": 0.0003, MATMUL_NAMED: 1.0}
    f = RULES["tensor-pipe-underused"](sgemm)
    assert isinstance(f, Fired) and f.magnitude == round(0.80 * (1 - 1 / 7.39), 4)  # 0.6917: the time TF32 would save
    assert any(e.metric == FMA_MATMUL for e in f.evidence)
    assert RULES["tensor-pipe-underused"]({k: v for k, v in sgemm.items() if k != MATMUL_NAMED}) is None  # Horner chains
    assert RULES["tensor-pipe-underused"](dict(sgemm, pipe_fma_cycles_pct=40.0)) is None  # not compute bound on FMA


def test_a_matrix_product_on_the_fma_pipe_is_no_speed_of_light():
    sgemm = {"pipe_fma_cycles_pct": 79.4, "pipe_tensor_cycles_pct": 0.0003, "sm_throughput_pct": 86.8, "issue_active_pct": 70.0,
             MATMUL_NAMED: 1.0}
    ev = evaluate(sgemm)
    assert ev.verdict is not None and ev.verdict.status == "limited" and ev.fired[0].signal == "tensor-pipe-underused"
    ev = evaluate({k: v for k, v in sgemm.items() if k != MATMUL_NAMED})  # the same counters, no matrix product
    assert ev.verdict is not None and ev.verdict.status == "speed-of-light" and ev.verdict.unit == "FMA pipe"


def test_l2_writes_all_hit_and_still_go_to_dram():
    # K = 64 cuBLAS GEMM writing 512 MB (blind4 b4_12): reads 7.96M sectors (7.38M hit), writes 16.78M, all "hits"
    k64 = {"l2_throughput_pct": 72.4, "dram_throughput_pct": 65.5, "l2_hit_rate": 97.8,
           "l2_tex_read_sectors": 7.96e6, "l2_tex_read_hit_sectors": 7.38e6, "l2_tex_write_sectors": 16.78e6}
    assert RULES["l2-bound"](k64) is None  # L2 serves 7.38 / 24.74 = 29.8% of the traffic: DRAM takes the rest
    reread = dict(k64, l2_tex_write_sectors=0.2e6)  # the same reads with few writes: 7.38 / 8.16 = 90.4% served
    f = RULES["l2-bound"](reread)
    assert isinstance(f, Fired) and f.evidence[1].value == round(100 * 7.38 / 8.16, 4)
    assert isinstance(RULES["l2-bound"]({k: v for k, v in k64.items() if not k.startswith("l2_tex")}), Fired)  # hit rate alone


def test_nothing_fired_with_a_unit_near_its_peak_is_near_the_speed_of_light():
    # a complete export where no rule fired (judge with no missing counters)
    fired, verdict = judge([], {"sm_throughput_pct": 77.9, "issue_active_pct": 80.0, "dram_throughput_pct": 49.0})
    assert verdict.status == "speed-of-light" and verdict.unit == "SM issue" and verdict.still_helps
    assert [f.signal for f in fired] == ["speed-of-light"]
    fired, verdict = judge([], {"sm_throughput_pct": 60.0, "issue_active_pct": 62.0, "dram_throughput_pct": 49.0})
    assert verdict.status == "no-signal" and not fired
