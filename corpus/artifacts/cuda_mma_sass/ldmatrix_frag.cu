#include <cstdint>

// 64 x 64 bf16 tile, 128-byte rows; 16-byte chunk c of row r lives at chunk c ^ (r & 7).
__device__ __forceinline__ uint32_t swz_offset(int row, int col) {   // col: bf16 index, multiple of 8
  return row * 128 + (((col >> 3) ^ (row & 7)) << 4);
}

#define PTX_LDSM_X4 "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile(PTX_LDSM_X4 " {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr));
}

// A fragment of the 16 x 16 sub-tile at (m0, k0): lane l addresses row m0 + l % 16, column k0 + (l / 16) * 8,
// so the four matrices arrive in mma.m16n8k16 order (rows 0-7 / 8-15 at k0, then at k0 + 8).
__device__ void load_a_frag(uint32_t (&a)[4], const void* tile, int m0, int k0) {
  const int lane = threadIdx.x % 32;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  ldsm_x4(a, base + swz_offset(m0 + lane % 16, k0 + (lane / 16) * 8));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ void stsm_x4(const void* dst, const uint32_t (&c)[4]) {   // four 8x8 matrices of packed bf16x2
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%4], {%0, %1, %2, %3};"
               :: "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(addr) : "memory");
}
#endif


__global__ void use_frag(uint32_t* out) {        // caller for the compile check
  __shared__ __align__(1024) unsigned short tile[64 * 64];
  uint32_t a[4];
  load_a_frag(a, tile, 0, 0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  stsm_x4(tile, a);
#endif
  out[threadIdx.x] = a[0] + a[3];
}
