"""Emulate gemm_bf16_sm80's data movement for one CTA with PTX semantics (numpy, fp32 math)."""
import numpy as np
BM = BN = 128; BK = 64
def swz(r, col):  # byte offset inside a [rows][64] bf16 tile
    return r * 128 + ((((col >> 3) ^ r) & 7) << 4)

def stage(tile_bytes, src, r0k):  # cp.async 16B chunks: src is [128, K] fp32 used as bf16 values
    for i in range(128 * 8):
        r, col = i >> 3, (i & 7) * 8
        off = swz(r, col)
        tile_bytes[off // 2: off // 2 + 8] = src[r, r0k + col: r0k + col + 8]

def ldmatrix_x4(tile, addrs):  # addrs[lane] = byte offset of a 16-byte row; returns regs[lane][4] of 2 values
    regs = np.zeros((32, 4, 2))
    for m in range(4):
        rows = [tile[addrs[8 * m + j] // 2: addrs[8 * m + j] // 2 + 8] for j in range(8)]
        for lane in range(32):
            r, c = lane // 4, 2 * (lane % 4)
            regs[lane, m] = rows[r][c:c + 2]
    return regs

def mma(acc, a, b):  # acc[lane][4], a[lane][4 regs][2], b[lane][2 regs][2]: m16n8k16 row.col
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        A[g, 2*t:2*t+2] = a[lane, 0]; A[g+8, 2*t:2*t+2] = a[lane, 1]
        A[g, 2*t+8:2*t+10] = a[lane, 2]; A[g+8, 2*t+8:2*t+10] = a[lane, 3]
        B[2*t:2*t+2, g] = b[lane, 0]; B[2*t+8:2*t+10, g] = b[lane, 1]
    C = A @ B
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        acc[lane] += [C[g, 2*t], C[g, 2*t+1], C[g+8, 2*t], C[g+8, 2*t+1]]

rng = np.random.default_rng(0)
K = 128
A = rng.standard_normal((BM, K)); Bt = rng.standard_normal((BN, K))
Cout = np.zeros((BM, BN))
for warp in range(4):
    wm, wn = (warp >> 1) * 64, (warp & 1) * 64
    acc = np.zeros((4, 8, 32, 4))
    for kt in range(K // BK):
        tA = np.zeros(BM * BK); tB = np.zeros(BN * BK)
        stage(tA, A, kt * BK); stage(tB, Bt, kt * BK)
        for kk in range(0, BK, 16):
            a = [ldmatrix_x4(tA, [swz(wm + i * 16 + (l & 15), kk + (l >> 4) * 8) for l in range(32)]) for i in range(4)]
            b = {}
            for j in range(0, 8, 2):
                r = ldmatrix_x4(tB, [swz(wn + j * 8 + (l & 7) + (l >> 4) * 8, kk + ((l >> 3) & 1) * 8) for l in range(32)])
                b[j] = r[:, 0:2]; b[j + 1] = r[:, 2:4]
            for i in range(4):
                for j in range(8):
                    mma(acc[i, j], a[i], b[j])
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(4):
            for j in range(8):
                row, col = wm + i * 16 + g, wn + j * 8 + 2 * t
                Cout[row, col:col + 2] = acc[i, j, lane, 0:2]; Cout[row + 8, col:col + 2] = acc[i, j, lane, 2:4]
err = np.abs(Cout - A @ Bt.T).max()
print("ladder emulation max abs error vs A @ B:", err, "OK" if err < 1e-9 else "MISMATCH")

# the one-warp hw-mma-sync example: sA[16][16], sB[8][16] (32-byte rows, no swizzle)
A1 = rng.standard_normal((16, 16)); Bt1 = rng.standard_normal((8, 16))
sA = A1.reshape(-1); sB = Bt1.reshape(-1)
aregs = ldmatrix_x4(sA, [((l % 16) * 16 + (l // 16) * 8) * 2 for l in range(32)])
# x2: lanes 0-15 supply addresses (matrix 0: lanes 0-7, matrix 1: lanes 8-15)
def ldmatrix_x2(tile, addrs):
    regs = np.zeros((32, 2, 2))
    for m in range(2):
        rows = [tile[addrs[8 * m + j] // 2: addrs[8 * m + j] // 2 + 8] for j in range(8)]
        for lane in range(32):
            regs[lane, m] = rows[lane // 4][2 * (lane % 4): 2 * (lane % 4) + 2]
    return regs
bregs = ldmatrix_x2(sB, [((l % 8) * 16 + ((l // 8) % 2) * 8) * 2 for l in range(32)])
acc1 = np.zeros((32, 4)); mma(acc1, aregs, bregs)
C1 = np.zeros((16, 8))
for lane in range(32):
    g, t = lane >> 2, lane & 3
    C1[g, 2*t:2*t+2] = acc1[lane, 0:2]; C1[g+8, 2*t:2*t+2] = acc1[lane, 2:4]
err1 = np.abs(C1 - A1 @ Bt1.T).max()
print("mma_m16n8k16 emulation max abs error:", err1, "OK" if err1 < 1e-9 else "MISMATCH")
