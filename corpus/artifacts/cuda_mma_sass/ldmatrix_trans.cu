#include <cstdint>
__global__ void k(uint32_t* out) {
  __shared__ __align__(16) unsigned short t[16 * 8];
  t[threadIdx.x] = threadIdx.x; __syncwarp();
  uint32_t r0, r1, a = static_cast<uint32_t>(__cvta_generic_to_shared(&t[(threadIdx.x % 16) * 8]));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(a));
  out[threadIdx.x] = r0 + r1;
}
