"""Run the Triton examples of the kwiki pages on the CPU with the Triton interpreter (TRITON_INTERPRET=1)
and compare with torch. Needs triton 3.8.0 and torch (CPU). Run: python interpreter_checks.py > interpreter_output.txt
"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl

# transpose (technique-triton-transpose)
@triton.jit
def transpose_2d(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(y_ptr + rn[:, None] * M + rm[None, :], tl.trans(tile), mask=tl.trans(mask))
x = torch.randn(200, 136); y = torch.empty(136, 200)
transpose_2d[(triton.cdiv(200, 64), triton.cdiv(136, 64))](x, y, 200, 136, BM=64, BN=64)
print("transpose ok:", torch.equal(y, x.T))

# dot_bt (technique-triton-transpose)
@triton.jit
def dot_bt(a_ptr, bt_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        bt = tl.load(bt_ptr + rn[:, None] * K + (k + rk)[None, :])
        acc = tl.dot(a, bt.T, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)
a = torch.randn(64, 128); bt = torch.randn(32, 128); c = torch.empty(64, 32)
dot_bt[(2, 2)](a, bt, c, 64, 32, 128, BM=32, BN=16, BK=32)
print("dot_bt ok:", torch.allclose(c, a @ bt.T, atol=1e-3, rtol=1e-3))

# scale_rows (technique-triton-coalescing)
@triton.jit
def scale_rows(x_ptr, y_ptr, n_rows, n_cols, stride_row, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rows = tl.where(rows < n_rows, rows, 0)
    rows = tl.max_contiguous(tl.multiple_of(rows, BLOCK_R), BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    ptrs = x_ptr + rows[:, None] * stride_row + cols[None, :]
    mask = cols[None, :] < n_cols
    x = tl.load(ptrs, mask=mask, other=0.0)
    tl.store(y_ptr + rows[:, None] * stride_row + cols[None, :], x * 2.0, mask=mask)
x = torch.randn(256, 1024, dtype=torch.float16); y = torch.empty_like(x)
scale_rows[(256 // 32,)](x, y, 256, 1024, x.stride(0), BLOCK_R=32, BLOCK_C=1024)
print("scale_rows ok:", torch.equal(y, x * 2))

# grouped matmul (technique-triton-matmul-tuning), without autotune
@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    rows_in_group = min(grid_m - first_m, GROUP_M)
    pm = first_m + (pid % width) % rows_in_group
    pn = (pid % width) // rows_in_group
    rm = (pm * BM + tl.arange(0, BM)) % M
    rn = (pn * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kmask = rk < K - k * BK
        a = tl.load(a_ptr + rm[:, None] * K + (k * BK + rk)[None, :], mask=kmask[None, :], other=0.0)
        b = tl.load(b_ptr + (k * BK + rk)[:, None] * N + rn[None, :], mask=kmask[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
    cm = pm * BM + tl.arange(0, BM)
    cn = pn * BN + tl.arange(0, BN)
    tl.store(c_ptr + cm[:, None] * N + cn[None, :], acc, mask=(cm[:, None] < M) & (cn[None, :] < N))
M, N, K = 100, 72, 80
a = torch.randn(M, K); b = torch.randn(K, N); c = torch.empty(M, N)
matmul[(triton.cdiv(M, 32) * triton.cdiv(N, 16),)](a, b, c, M, N, K, BM=32, BN=16, BK=32, GROUP_M=2)
print("grouped matmul ok:", torch.allclose(c, a @ b, atol=1e-3, rtol=1e-3))

# small_m_dot (pattern-triton-dot-mma-fallback)
@triton.jit
def small_m_dot(a_ptr, b_ptr, c_ptr, K, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)
a = torch.randn(64, 256); b = torch.randn(256, 128); c = torch.empty(64, 128)
small_m_dot[(1,)](a, b, c, 256, 128, BM=16, BN=128, BK=64)
print("small_m_dot ok:", torch.allclose(c[:16], (a @ b)[:16], atol=1e-3, rtol=1e-3))
