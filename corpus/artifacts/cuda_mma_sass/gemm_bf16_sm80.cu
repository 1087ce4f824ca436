#include <cuda_bf16.h>
#include <cstdint>

constexpr int BM = 128, BN = 128, BK = 64, THREADS = 128;     // 4 warps as 2 x 2, each 64 x 64
constexpr int TILE_BYTES = BM * BK * 2;                       // 16 KB per operand per stage
#define PTX_CP16  "cp.async.cg.shared.global"
#define PTX_LDSM4 "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
#define PTX_HMMA  "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"

// 128-byte rows (64 bf16); 16-byte chunk c of row r is stored at chunk c ^ (r & 7)
__device__ __forceinline__ uint32_t swz(int r, int col) { return r * 128 + ((((col >> 3) ^ r) & 7) << 4); }

__device__ __forceinline__ void stage_tile(uint32_t dst, const __nv_bfloat16* src, int ld, int tid) {
#pragma unroll
  for (int i = tid; i < 128 * 8; i += THREADS) {              // 128 rows x 8 chunks of 16 bytes
    const int r = i >> 3, col = (i & 7) * 8;
    asm volatile(PTX_CP16 " [%0], [%1], 16;" :: "r"(dst + swz(r, col)), "l"(src + (size_t)r * ld + col));
  }
}

// C (fp32, M x N row-major) = A (bf16, M x K row-major) * B, with B passed as Bt (N x K row-major).
// M, N multiples of 128, K a multiple of 64. Dynamic shared memory: 2 stages x 2 operands x 16 KB.
__global__ void __launch_bounds__(THREADS) gemm_bf16_sm80(const __nv_bfloat16* A, const __nv_bfloat16* Bt,
                                                          float* C, int M, int N, int K) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp >> 1) * 64, wn = (warp & 1) * 64;
  const __nv_bfloat16* gA = A + (size_t)blockIdx.y * BM * K;
  const __nv_bfloat16* gB = Bt + (size_t)blockIdx.x * BN * K;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto tileA = [&](int s) { return base + s * 2 * TILE_BYTES; };
  auto tileB = [&](int s) { return base + s * 2 * TILE_BYTES + TILE_BYTES; };

  float acc[4][8][4] = {};
  const int ktiles = K / BK;
  stage_tile(tileA(0), gA, K, tid);
  stage_tile(tileB(0), gB, K, tid);
  asm volatile("cp.async.commit_group;");
  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt & 1;
    if (kt + 1 < ktiles) {                                    // prefetch tile kt+1 into the other stage
      stage_tile(tileA(s ^ 1), gA + (kt + 1) * BK, K, tid);
      stage_tile(tileB(s ^ 1), gB + (kt + 1) * BK, K, tid);
    }
    asm volatile("cp.async.commit_group;");                   // possibly empty: keeps the count uniform
    asm volatile("cp.async.wait_group 1;");                   // this thread's copies of tile kt landed
    __syncthreads();                                          // everyone's did
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t a[4][4], b[8][2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        asm volatile(PTX_LDSM4 " {%0, %1, %2, %3}, [%4];"
                     : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3])
                     : "r"(tileA(s) + swz(wm + i * 16 + (lane & 15), kk + (lane >> 4) * 8)));
#pragma unroll
      for (int j = 0; j < 8; j += 2)                          // one x4 = two n8 tiles x k16
        asm volatile(PTX_LDSM4 " {%0, %1, %2, %3}, [%4];"
                     : "=r"(b[j][0]), "=r"(b[j][1]), "=r"(b[j + 1][0]), "=r"(b[j + 1][1])
                     : "r"(tileB(s) + swz(wn + j * 8 + (lane & 7) + (lane >> 4) * 8, kk + ((lane >> 3) & 1) * 8)));
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          asm volatile(PTX_HMMA " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                       : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                       : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
    }
    __syncthreads();                                          // stage s is refilled next iteration
  }
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const size_t row = (size_t)blockIdx.y * BM + wm + i * 16 + g, col = (size_t)blockIdx.x * BN + wn + j * 8 + 2 * t;
      *reinterpret_cast<float2*>(C + row * N + col) = make_float2(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<float2*>(C + (row + 8) * N + col) = make_float2(acc[i][j][2], acc[i][j][3]);
    }
}
// host: cudaFuncSetAttribute(gemm_bf16_sm80, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * TILE_BYTES);
//       gemm_bf16_sm80<<<dim3(N / BN, M / BM), THREADS, 4 * TILE_BYTES>>>(A, Bt, C, M, N, K);
