"""Compile-only checks of what Triton 3.8.0 generates for the kernels on kwiki's Triton pages.

No GPU is needed: kernels are compiled ahead of time for explicit targets (sm_80, sm_90, sm_100) and
the TTGIR / PTX text is inspected. Run: python triton_codegen_checks.py > codegen_output.txt
(MLIR_ENABLE_DIAGNOSTICS=remarks also prints the MMA-selection remarks on stderr).
"""
import re

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


def build(fn, sig, consts, cc, num_warps=4, num_stages=3, div16=()):
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in div16}   # what the JIT infers for 16-aligned args
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", cc, 32), options={"num_warps": num_warps, "num_stages": num_stages})


def attrs_of(text, pattern):
    return re.findall(pattern, text)


@triton.jit
def scale_rows(x_ptr, y_ptr, n_rows, n_cols, stride_row, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rows = tl.where(rows < n_rows, rows, 0)
    rows = tl.max_contiguous(tl.multiple_of(rows, BLOCK_R), BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    mask = cols[None, :] < n_cols
    x = tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0)
    tl.store(y_ptr + rows[:, None] * stride_row + cols[None, :], x * 2.0, mask=mask)


@triton.jit
def copy2d(x_ptr, y_ptr, ld, BM: tl.constexpr, BN: tl.constexpr):
    r = tl.program_id(0) * BM + tl.arange(0, BM)
    c = tl.arange(0, BN)
    tl.store(y_ptr + r[:, None] * ld + c[None, :], tl.load(x_ptr + r[:, None] * ld + c[None, :]))


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, K, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


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


@triton.jit
def transpose_2d(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(y_ptr + rn[:, None] * M + rm[None, :], tl.trans(tile), mask=tl.trans(mask))


@triton.jit
def mm_desc(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, WS: tl.constexpr):
    a_d = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_d = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_d = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pm, pn = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), warp_specialize=WS):
        a = a_d.load([pm * BM, k * BK])
        b = b_d.load([pn * BN, k * BK])
        acc = tl.dot(a, b.T, acc)
    c_d.store([pm * BM, pn * BN], acc.to(tl.bfloat16))


@triton.jit
def chained_dot(q_ptr, k_ptr, v_ptr, o_ptr, N, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    rm, rn, rd = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, D), dtype=tl.float32)
    for start in range(0, N, BN):
        kt = tl.load(k_ptr + (start + rn)[None, :] * D + rd[:, None])
        p = tl.exp(tl.dot(q, kt)).to(tl.bfloat16)          # attention-like P = exp(Q K^T)
        v = tl.load(v_ptr + (start + rn)[:, None] * D + rd[None, :])
        acc = tl.dot(p, v, acc)                              # P feeds the second dot from registers
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc)


def main():
    print("triton", triton.__version__)
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "n_rows": "i32", "n_cols": "i32", "stride_row": "i32",
           "BLOCK_R": "constexpr", "BLOCK_C": "constexpr"}
    for div in [("x_ptr", "y_ptr", "n_rows", "n_cols", "stride_row"), ("x_ptr", "y_ptr", "n_rows", "stride_row"),
                ("x_ptr", "y_ptr", "n_rows", "n_cols")]:
        k = build(scale_rows, sig, {"BLOCK_R": 32, "BLOCK_C": 1024}, 90, div16=div)
        loads = sorted({l.split()[1] for l in k.asm["ptx"].splitlines() if "ld.global" in l})
        print("coalesce sm_90 div16=%s: %s %s" % (",".join(div), loads, attrs_of(k.asm["ttgir"], r"#ttg\.blocked<\{[^}]*\}>")))

    k = build(copy2d, {"x_ptr": "*fp16", "y_ptr": "*fp16", "ld": "i32", "BM": "constexpr", "BN": "constexpr"},
              {"BM": 128, "BN": 64}, 90, div16=("x_ptr", "y_ptr", "ld"))
    print("layout 128x64 fp16 num_warps=4:", attrs_of(k.asm["ttgir"], r"#ttg\.blocked<\{[^}]*\}>"))

    msig = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32", "K": "i32", "N": "i32",
            "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    cases = [(90, 128, 128, 64, 4, "bf16"), (90, 128, 128, 64, 8, "bf16"), (90, 128, 128, 64, 2, "bf16"),
             (90, 16, 128, 64, 4, "bf16"), (90, 64, 128, 64, 4, "bf16"), (90, 128, 128, 32, 4, "bf16"),
             (90, 128, 128, 16, 4, "bf16"), (90, 128, 128, 128, 8, "fp8e4nv"), (80, 128, 128, 64, 4, "bf16"),
             (80, 128, 128, 32, 4, "bf16"), (80, 128, 128, 16, 4, "bf16"), (100, 128, 128, 64, 4, "bf16"),
             (100, 128, 128, 64, 16, "bf16")]
    for cc, bm, bn, bk, nw, dt in cases:
        s = dict(msig, a_ptr="*" + dt, b_ptr="*" + dt)
        k = build(mm, s, {"BM": bm, "BN": bn, "BK": bk}, cc, num_warps=nw, div16=("a_ptr", "b_ptr", "c_ptr", "K", "N"))
        g, p = k.asm["ttgir"], k.asm["ptx"]
        ins = [x for x in ("wgmma.mma_async", "tcgen05.mma", "mma.sync", "ldmatrix", "cp.async.cg") if x in p]
        ops = [x for x in ("ttng.warp_group_dot ", "ttng.warp_group_dot_wait", "ttng.tc_gen5_mma", "ttng.tmem_alloc",
                           "ttg.async_copy_global_to_local") if x in g]
        print("dot sm_%d %s %dx%dx%d warps=%d: %s %s ptx=%s ttgir=%s" % (
            cc, dt, bm, bn, bk, nw, attrs_of(g, r"#ttg\.nvidia_mma<\{[^}]*\}>"),
            attrs_of(g, r"#ttg\.(?:nvmma_shared|swizzled_shared)<\{[^}]*\}>"), ins, [o.strip() for o in ops]))

    for dt, bk in (("bf16", 64), ("fp8e4nv", 128)):
        k = build(dot_bt, {"a_ptr": "*" + dt, "bt_ptr": "*" + dt, "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
                           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
                  {"BM": 128, "BN": 128, "BK": bk}, 90, div16=("a_ptr", "bt_ptr", "c_ptr", "M", "N", "K"))
        g = k.asm["ttgir"]
        print("dot(a, bt.T) sm_90 %s: memdesc_trans=%s %s wgmma=%s" % (
            dt, "ttg.memdesc_trans" in g, attrs_of(g, r"#ttg\.nvmma_shared<\{[^}]*\}>"), "wgmma.mma_async" in k.asm["ptx"]))

    k = build(transpose_2d, {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "BM": "constexpr", "BN": "constexpr"},
              {"BM": 64, "BN": 64}, 90, div16=("x_ptr", "y_ptr", "M", "N"))
    p = k.asm["ptx"]
    print("transpose 64x64 fp32 sm_90: convert_layout=%d shared_bytes=%d global=%s" % (
        k.asm["ttgir"].count("ttg.convert_layout"), k.metadata.shared,
        sorted({l.split()[1] for l in p.splitlines() if "ld.global" in l or "st.global" in l})))
    print("asm keys:", sorted(k.asm.keys()), "sass has LDG.E.128:", "LDG.E.128" in k.asm["sass"])
    ssig = dict(msig, c_ptr="*bf16")
    for cc in (80, 90, 100):
        for bm, bn, bk, nw in ((128, 256, 64, 8), (128, 128, 64, 4)):
            for st in (2, 3, 4):
                k = build(mm, ssig, {"BM": bm, "BN": bn, "BK": bk}, cc, num_warps=nw, num_stages=st,
                          div16=("a_ptr", "b_ptr", "c_ptr", "K", "N"))
                one = (bm * bk + bk * bn) * 2
                print("stages sm_%d %dx%dx%d bf16 num_stages=%d: shared=%d bytes = %.2f x one A+B stage (%d)" % (
                    cc, bm, bn, bk, st, k.metadata.shared, k.metadata.shared / one, one))

    dsig = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
            "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "WS": "constexpr"}
    ops = ["ttng.tensormap_create", "ttng.async_tma_copy_global_to_local", "ttng.barrier_expect", "ttng.wait_barrier",
           "ttng.warp_group_dot ", "ttng.tc_gen5_mma", "ttng.tmem_alloc", "ttg.warp_specialize",
           "ttng.async_tma_copy_local_to_global"]
    ptxs = ["cp.async.bulk.tensor", "wgmma.mma_async", "tcgen05.mma", "mbarrier.try_wait", "setmaxnreg"]
    for cc in (90, 100):
        for ws in (False, True):
            k = build(mm_desc, dsig, {"BM": 128, "BN": 128, "BK": 64, "WS": ws}, cc, num_warps=4, num_stages=3,
                      div16=("a_ptr", "b_ptr", "c_ptr", "M", "N", "K"))
            g, p = k.asm["ttgir"], k.asm["ptx"]
            regs = re.findall(r"requestedRegisters = array<i32: [0-9, ]+>", g) + re.findall(r"num_warps\(\d+\)", g)
            print("descriptor dot sm_%d warp_specialize=%s: ttgir=%s ptx=%s shared=%d launched_warps=%d %s" % (
                cc, ws, [o.strip() for o in ops if o in g], [x for x in ptxs if x in p], k.metadata.shared,
                k.metadata.num_warps, regs))


    csig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*fp32", "N": "i32",
            "BM": "constexpr", "BN": "constexpr", "D": "constexpr"}
    k = build(chained_dot, csig, {"BM": 128, "BN": 64, "D": 64}, 90, num_warps=4, num_stages=2,
              div16=("q_ptr", "k_ptr", "v_ptr", "o_ptr", "N"))
    g = k.asm["ttgir"]
    second = [l for l in g.splitlines() if "ttng.warp_group_dot " in l][-1]
    print("chained dot sm_90: second dot A operand in registers:", "tensor<128x64xbf16, #ttg.dot_op<{opIdx = 0" in second,
          "local_alloc=%d" % g.count("ttg.local_alloc"), attrs_of(g, r"#ttg\.nvidia_mma<\{[^}]*\}>"))


if __name__ == "__main__":
    main()
