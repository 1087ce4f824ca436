"""Regenerate this fixture workspace: python tests/data/ledger/generate.py

Two tasks (transpose, gemm-bf16), 36 candidates, one newer version (t15 promoted), one malformed
line (21, a write cut short by a crash), one unknown field (t16 reviewer), one missing parent (g18),
and benchmark.csv rows merged into t11, g15 and t07 (the last without a task column).
"""
import csv
import json
from pathlib import Path

out = Path(__file__).resolve().parent
T = "transpose"
G = "gemm-bf16"
def C(task, id, parent, mech, tech, pat, status, reason, passed=True, detail="", bench=None, ev=None, author="agent:kwiki-agent", day=1, kernel=None, **extra):
    d = {"id": id, "parent": parent, "task": task, "kernel": kernel or ("transpose_tiled" if task == T else "gemm_wgmma"),
         "mechanism": mech, "techniques": tech, "patterns": pat,
         "correctness": {"passed": passed, "detail": detail or ("matches the reference on 6 shapes" if passed else "")},
         "benchmarks": bench or [], "evidence": ev or {}, "status": status, "reason": reason,
         "created_at": f"2026-11-{day:02d}T10:00:00+00:00", "updated_at": f"2026-11-{day:02d}T10:00:00+00:00", "author": author}
    d.update(extra)
    return d

def tb(v, base):  # transpose bench: GB/s (higher is better)
    return [{"shape": "8192x8192", "dtype": "fp32", "gpu": "H100", "metric": "bandwidth", "value": v, "baseline": base, "unit": "GB/s"}]
def gb(v, base):  # gemm bench: TFLOP/s
    return [{"shape": "8192x8192x8192", "dtype": "bf16", "gpu": "H100", "metric": "throughput", "value": v, "baseline": base, "unit": "TFLOP/s"}]

rows = [
 C(T, "t00", None, "naive transpose: one thread per element, reads along rows, writes along columns", [], ["pattern-uncoalesced-global-access"], "promoted", "baseline every later candidate is measured against", bench=tb(610, 610), ev={"signals": ["uncoalesced-global", "sparse-stores"], "metrics": {"dram_throughput_pct": 31.0}, "reports": ["reports/t00.ncu-rep"]}, author="person:ana", day=1),
 C(T, "t01", "t00", "stage a 32x32 tile in shared memory so both the global read and the global write are coalesced", ["technique-coalesced-access"], ["pattern-uncoalesced-global-access", "pattern-sparse-partial-stores"], "promoted", "writes now coalesced; 1.9x over the naive kernel", bench=tb(1160, 610), ev={"signals": ["smem-bank-conflicts"], "metrics": {"l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ld": 1.05e7}, "reports": ["reports/t01.ncu-rep"]}, day=2),
 C(T, "t02", "t00", "read the input through the read-only cache (__ldg) and leave the writes strided", ["technique-cache-policy"], ["pattern-uncoalesced-global-access"], "rejected", "no gain: the strided writes, not the reads, waste the DRAM sectors", bench=tb(615, 610), day=2),
 C(T, "t03", "t01", "pad the shared-memory tile to 32x33 so a column read hits 32 different banks", ["technique-shared-memory-padding"], ["pattern-shared-memory-bank-conflicts"], "promoted", "32-way bank conflicts gone; 1.6x over t01", bench=tb(1850, 1160), ev={"signals": [], "metrics": {"l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ld": 0.0, "dram_throughput_pct": 74.0}, "reports": ["reports/t03.ncu-rep"]}, day=3),
 C(T, "t04", "t01", "XOR-swizzle the shared-memory tile index instead of padding it", ["technique-smem-swizzling"], ["pattern-shared-memory-bank-conflicts"], "rejected", "removes the bank conflicts too but is no faster than padding and the index math is harder to read", bench=tb(1845, 1160), day=3),
 C(T, "t05", "t03", "use a 64x64 padded tile per block to move more bytes per block", ["technique-shared-memory-padding"], ["pattern-occupancy-limited-shared-memory"], "rejected", "16.6 KB of shared memory per block halves the resident blocks; slower", bench=tb(1610, 1850), ev={"signals": ["occupancy-shared-memory"], "metrics": {"achieved_occupancy": 38.0}}, day=4),
 C(T, "t06", "t03", "load the tile with a TMA bulk tensor copy instead of per-thread loads", ["technique-tma-pipeline"], [], "rejected", "wrong results on shapes that are not a multiple of the box size (edge tiles not masked)", passed=False, detail="mismatch on 8191x8190: out-of-bounds box fills zeros over valid data", day=4),
 C(T, "t07", "t03", "thread coarsening: each thread moves 4 elements (32x8 threads per 32x32 tile)", ["technique-thread-coarsening"], ["pattern-dram-bandwidth-bound"], "promoted", "fewer blocks and index computations; 1.12x over t03", bench=tb(2070, 1850), ev={"signals": ["dram-bound"], "metrics": {"dram_throughput_pct": 86.0}, "reports": ["reports/t07.ncu-rep"]}, day=5),
 C(T, "t08", "t07", "thread coarsening to 8 elements per thread", ["technique-thread-coarsening"], ["pattern-low-occupancy"], "rejected", "more registers per thread and fewer warps to hide latency; 4% slower than t07", bench=tb(1990, 2070), day=5),
 C(T, "t09", "t07", "stage the tile with cp.async to overlap the global read with the previous tile's write", ["technique-cp-async-pipeline"], ["pattern-async-copy-underuse"], "rejected", "no gain for a pure copy: the kernel is DRAM-bound, latency is already hidden", bench=tb(2065, 2070), day=6),
 C(T, "t10", "t07", "float4 vectorized global loads and stores on top of the padded tile", ["technique-vectorized-loads"], ["pattern-shared-memory-bank-conflicts"], "rejected", "misaligned address errors: the 33-column padding breaks 16-byte alignment of the shared tile rows", passed=False, detail="cudaErrorMisalignedAddress on every shape", day=6),
 C(T, "t11", "t07", "float2 vectorized global loads with a 32x34 padded tile to keep 8-byte alignment", ["technique-vectorized-loads", "technique-shared-memory-padding"], ["pattern-shared-memory-bank-conflicts", "pattern-dram-bandwidth-bound"], "promoted", "aligned, conflict-free and 1.05x over t07; reaches 91% of the device copy kernel", bench=tb(2180, 2070), ev={"signals": ["dram-bound"], "metrics": {"dram_throughput_pct": 91.0, "l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ld": 0.0}, "reports": ["reports/t11.ncu-rep"]}, day=7),
 C(T, "t12", "t10", "float4 loads with a swizzled (unpadded) tile so rows stay 16-byte aligned", ["technique-vectorized-loads", "technique-smem-swizzling"], ["pattern-shared-memory-bank-conflicts"], "candidate", "correct; waiting for the benchmark on B200", bench=tb(2150, 2070), day=7),
 C(T, "t13", "t07", "persistent grid-stride loop over tiles with one block per SM", ["technique-persistent-kernels", "technique-grid-stride-loops"], ["pattern-tail-effect"], "rejected", "no tail effect to remove: 65536 tiles make hundreds of waves; 2% slower", bench=tb(2030, 2070), day=8),
 C(T, "t14", "t11", "__launch_bounds__(256, 8) to cap registers at 32 per thread", ["technique-launch-bounds"], ["pattern-occupancy-limited-registers"], "rejected", "already at full occupancy; no change", bench=tb(2178, 2180), day=8, author="person:ana"),
 C(T, "t15", "t11", "cache-streaming stores (st.global.cs) so the output does not evict the input from L2", ["technique-cache-policy"], ["pattern-cache-thrashing"], "candidate", "", bench=tb(2195, 2180), day=9),
 C(T, "t16", "t04", "swizzle with 64-bit elements for the fp64 variant", ["technique-smem-swizzling"], ["pattern-shared-memory-bank-conflicts"], "rejected", "2-way bank conflicts remain for 8-byte elements; padding by one double is simpler", bench=[{"shape": "8192x8192", "dtype": "fp64", "gpu": "H100", "metric": "bandwidth", "value": 1700, "baseline": 1720, "unit": "GB/s"}], day=9, reviewer="ana"),
 C(G, "g00", None, "baseline: Ampere-style mma.sync GEMM with cp.async double buffering", ["technique-cp-async-pipeline"], ["pattern-tensor-cores-underused"], "promoted", "starting point", bench=gb(380, 380), ev={"signals": ["tensor-pipe-underused"], "metrics": {"sm_throughput_pct": 48.0}}, day=1, author="person:bo"),
 C(G, "g01", "g00", "replace mma.sync with wgmma on a 128x128 tile, one consumer warpgroup", [], ["pattern-tensor-cores-underused"], "promoted", "wgmma issues from shared memory directly; 1.5x", bench=gb(570, 380), day=2),
 C(G, "g02", "g01", "load A and B tiles with TMA into a 3-stage mbarrier pipeline", ["technique-tma-pipeline"], ["pattern-long-scoreboard-latency"], "promoted", "long-scoreboard stalls drop from 41% to 9%", bench=gb(655, 570), ev={"signals": [], "metrics": {"smsp__pcsamp_warps_issue_stalled_long_scoreboard": 9.0}, "reports": ["reports/g02.ncu-rep"]}, day=3),
 C(G, "g03", "g02", "deepen the TMA pipeline to 5 stages", ["technique-tma-pipeline"], ["pattern-occupancy-limited-shared-memory"], "rejected", "shared memory per block rises to 200 KB, one block per SM; no faster than 3 stages", bench=gb(650, 655), day=3),
 C(G, "g04", "g02", "warp specialization: one producer warp issues TMA, two consumer warpgroups run wgmma", ["technique-warp-specialization"], ["pattern-producer-consumer-pipeline-bubbles"], "promoted", "producer and consumers overlap; 1.1x", bench=gb(720, 655), day=4),
 C(G, "g05", "g04", "ping-pong the two consumer warpgroups so one runs the epilogue while the other runs MMAs", ["technique-ping-pong-scheduling"], ["pattern-epilogue-bound-gemm"], "promoted", "epilogue hidden behind the other warpgroup's MMAs; 1.06x", bench=gb(765, 720), day=5),
 C(G, "g06", "g05", "persistent kernel with a static tile scheduler, one CTA per SM", ["technique-persistent-kernels", "technique-tile-scheduling"], ["pattern-tail-effect"], "promoted", "removes the launch and the partial last wave; 1.04x", bench=gb(795, 765), ev={"signals": [], "metrics": {"waves_per_sm": 1.0}}, day=6),
 C(G, "g07", "g06", "stream-K decomposition to balance the last wave across SMs", ["technique-stream-k"], ["pattern-tail-effect", "pattern-split-k-reduction-overhead"], "rejected", "fixup reductions cost more than the tail they remove at 8192^3; 3% slower", bench=gb(772, 795), day=7),
 C(G, "g08", "g06", "split-K by 2 with fp32 atomics on the output", ["technique-split-k"], ["pattern-atomic-contention"], "rejected", "results differ run to run beyond tolerance (atomic order) and it is slower", passed=False, detail="max abs error 3.1e-2 against the fp32 reference, tolerance 1e-2", day=7),
 C(G, "g09", "g06", "TMA multicast of the B tile across a 2x1 thread-block cluster", ["technique-tma-multicast"], ["pattern-l2-bandwidth-bound"], "candidate", "correct; profile pending", bench=gb(801, 795), day=8),
 C(G, "g10", "g06", "setmaxnreg: 40 registers for the producer, 232 for the consumer warpgroups", ["technique-register-budgeting"], ["pattern-occupancy-limited-registers"], "promoted", "consumers stop spilling accumulators; 1.03x", bench=gb(820, 795), day=8),
 C(G, "g11", "g10", "grow the tile to 128x256 per consumer warpgroup", [], ["pattern-register-spilling"], "rejected", "ptxas reports 480 bytes of spill stores per thread; slower", bench=gb(760, 820), ev={"signals": ["register-spilling"], "metrics": {"registers_per_thread": 255.0}}, day=9),
 C(G, "g12", "g10", "fuse bias and GELU into the epilogue", ["technique-epilogue-fusion"], ["pattern-epilogue-bound-gemm"], "rejected", "out of scope for this task (the benchmark is a plain GEMM); moved to the mlp task", day=9, author="person:bo"),
 C(G, "g13", "g10", "128-byte shared-memory swizzle for the wgmma operand tiles", ["technique-smem-swizzling"], ["pattern-shared-memory-bank-conflicts"], "rejected", "TMA already writes the 128B swizzle the wgmma descriptors expect; no bank conflicts to remove", bench=gb(819, 820), day=10),
 C(G, "g14", "g10", "quantize A and B to fp8 e4m3", ["technique-fp8-quantization"], [], "rejected", "breaks the bf16 accuracy requirement of the task", passed=False, detail="relative error 4e-2", day=10),
 C(G, "g15", "g10", "raster the persistent tile order along M in swizzled groups of 8 for L2 reuse", ["technique-tile-scheduling"], ["pattern-l2-bandwidth-bound"], "promoted", "L2 hit rate from 62% to 85%; 1.02x", bench=gb(838, 820), day=11),
 C(G, "g16", "g03", "5 stages with a 128x64 tile to fit two blocks per SM", ["technique-tma-pipeline"], ["pattern-occupancy-limited-shared-memory"], "rejected", "two blocks fit but the smaller tile halves data reuse; slower", bench=gb(610, 650), day=11),
 C(G, "g17", "g15", "programmatic dependent launch to overlap the prologue with the previous kernel", ["technique-programmatic-dependent-launch"], ["pattern-launch-overhead-tiny-kernels"], "candidate", "", day=12),
 C(G, "g18", "gx9", "try a 2-CTA cluster with distributed shared memory for the A tile (parent lost in a crashed session)", [], [], "candidate", "", day=12),
]
lines = [json.dumps(r) for r in rows]
# a status change later in the file: t15 is decided after its benchmark
upd = dict(rows[15])
upd.update(status="promoted", reason="1.01x over t11 and no L2 evictions of the input", updated_at="2026-11-13T09:00:00+00:00")
lines.append(json.dumps(upd))
# one malformed line (a truncated write), in the middle
lines.insert(20, '{"id": "g99", "parent": "g01", "task": "gemm-bf16", "mechanism": "truncated by a cra')
(out / "candidates.jsonl").write_text("\n".join(lines) + "\n")
with open(out / "benchmark.csv", "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["candidate_id", "task", "shape", "dtype", "gpu", "metric", "value", "baseline", "unit"])
    w.writerow(["t11", "transpose", "4096x4096", "fp32", "H100", "bandwidth", 2010, 1930, "GB/s"])
    w.writerow(["g15", "gemm-bf16", "4096x4096x4096", "bf16", "H100", "throughput", 700, 688, "TFLOP/s"])
    w.writerow(["t07", "", "8192x8192", "fp32", "B200", "bandwidth", 3900, 3480, "GB/s"])
print(len(rows), "candidates")
