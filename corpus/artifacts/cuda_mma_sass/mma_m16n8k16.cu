#include <cuda_bf16.h>
#include <cstdint>

#define PTX_LDSM_X4 "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
#define PTX_LDSM_X2 "ldmatrix.sync.aligned.m8n8.x2.shared.b16"
#define PTX_MMA_BF16 "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"

// C[16x8] (fp32, row-major) = A[16x16] (bf16, row-major) * B[16x8]; B is passed transposed (Bt[n][k]).
__global__ void mma_m16n8k16(const __nv_bfloat16* A, const __nv_bfloat16* Bt, float* C) {
  __shared__ __align__(16) __nv_bfloat16 sA[16][16];
  __shared__ __align__(16) __nv_bfloat16 sB[8][16];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) sA[i / 16][i % 16] = A[i];
  for (int i = lane; i < 128; i += 32) sB[i / 16][i % 16] = Bt[i];
  __syncwarp();

  uint32_t a[4], b[2];
  uint32_t pa = static_cast<uint32_t>(__cvta_generic_to_shared(&sA[lane % 16][(lane / 16) * 8]));
  uint32_t pb = static_cast<uint32_t>(__cvta_generic_to_shared(&sB[lane % 8][((lane / 8) % 2) * 8]));
  asm volatile(PTX_LDSM_X4 " {%0, %1, %2, %3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
  asm volatile(PTX_LDSM_X2 " {%0, %1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(pb));

  float d[4] = {0.f, 0.f, 0.f, 0.f};        // C and D share registers: D = A * B + D
  asm volatile(PTX_MMA_BF16 " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  const int g = lane >> 2, t = lane & 3;
  C[g * 8 + 2 * t] = d[0];       C[g * 8 + 2 * t + 1] = d[1];
  C[(g + 8) * 8 + 2 * t] = d[2]; C[(g + 8) * 8 + 2 * t + 1] = d[3];
}
// launch: mma_m16n8k16<<<1, 32>>>(dA, dBt, dC);  build: nvcc -arch=sm_80 (also runs on sm_90 / sm_100)
