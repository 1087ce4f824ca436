"""route(): NCU vocabulary in free text -> signals; ordinary questions -> nothing."""

from __future__ import annotations

import time

import pytest

from kwiki.profiling.routing import route
from kwiki.profiling.signals import SIGNAL_IDS, load_signals


@pytest.mark.parametrize("text,signal", [
    ("my kernel is dominated by stall_long_scoreboard", "long-scoreboard"),
    ("Stall Long Scoreboard is 60% of the warp state", "long-scoreboard"),
    ("warps stalled on barrier most of the time", "barrier-stalls"),
    ("ncu: this partial wave may account for up to 50.0% of the total runtime", "tail-effect"),
    ("only 8 of my 132 SMs are busy at the end", "tail-effect"),
    ("only 20 of 132 SMs have any work", "small-grid"),
    ("On average, only 4.0 of the 32 bytes transmitted per sector are utilized by each thread", "uncoalesced-global"),
    ("smsp__pcsamp_warps_issue_stalled_mio_throttle is the top stall", "mio-throttle"),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum is huge", "smem-bank-conflicts"),
    ("32-way bank conflict in my transpose", "smem-bank-conflicts"),
    ("lots of register spilling with __launch_bounds__", "register-spilling"),
    ("smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio high", "lg-throttle"),
    ("This kernel's theoretical occupancy (12.5%) is limited by the required amount of shared memory.", "occupancy-shared-memory"),
    ("Block Limit Registers is the smallest", "occupancy-registers"),
    ("the tail effect of my GEMM", "tail-effect"),
    ("many tiny kernels, launch overhead dominates", "launch-overhead"),
    ("stall_membar after __threadfence", "membar-stalls"),
    ("math pipe throttle stalls in my FMA loop", "math-pipe-throttle"),
    ("low IPC, stall wait everywhere", "low-ipc"),
    ("warp divergence in my MoE router", "warp-divergence"),
    ("atomic contention on a histogram", "atomic-contention"),
    ("DRAM throughput is 92% and the kernel is memory bound", "dram-bound"),
    ("the kernel is compute bound, FMA pipe 90%", "fma-bound"),
    ("no_instruction stalls and icache misses", "instruction-fetch-stalls"),
    ("On average, each warp of this workload spends 12.8 cycles being stalled waiting for sibling warps at a CTA barrier. "
     "This stall type represents about 51.3% of the total average of 25.0 cycles between issuing two instructions.", "barrier-stalls"),
    ("each warp spends 73.5 cycles being stalled waiting for the L1 instruction queue for local and global (LG) memory "
     "operations to be not full", "lg-throttle"),
])
def test_route_finds_signal(text, signal):
    out = route(text)
    assert out, text
    assert out[0]["signal"] == signal, out
    top = out[0]
    assert 0 < top["confidence"] <= 1 and top["matched"]
    assert top["patterns"] == load_signals()[signal].patterns
    assert top["symptoms"] and isinstance(top["expand"], list) and top["expand"]


@pytest.mark.parametrize("text", [
    "how do I use TMA multicast", "what is wgmma", "FlashAttention 3 on Hopper", "how to write a softmax kernel in Triton",
    "explain the tcgen05 instruction", "cute layout algebra", "fp8 block scaled gemm on blackwell", "", "   ",
    "what does setmaxnreg do", "persistent kernel with stream-k", "hello world",
])
def test_route_ignores_ordinary_queries(text):
    out = route(text)
    assert all(d["confidence"] < 0.5 for d in out), out


def test_route_results_are_sorted_and_valid():
    out = route("long scoreboard and barrier stalls with bank conflicts, l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    assert len(out) >= 3
    assert [d["confidence"] for d in out] == sorted((d["confidence"] for d in out), reverse=True)
    assert all(d["signal"] in SIGNAL_IDS for d in out)


def test_route_is_fast():
    texts = ["my kernel is dominated by stall_long_scoreboard", "how do I use TMA multicast",
             "smsp__pcsamp_warps_issue_stalled_mio_throttle is the top stall and 32-way bank conflict"]
    route(texts[0])
    started = time.perf_counter()
    for _ in range(100):
        for t in texts:
            route(t)
    per_call_ms = (time.perf_counter() - started) * 1000 / 300
    assert per_call_ms < 1.0, per_call_ms


def test_route_odd_inputs():
    assert route(None) == []  # type: ignore[arg-type]
    assert route("x" * 100_000) == []
    assert isinstance(route("stall_" * 5000), list)
