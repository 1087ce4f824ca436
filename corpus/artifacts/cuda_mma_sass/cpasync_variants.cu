#include <cstdint>
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__global__ void cp_variants(const float4* __restrict__ g, float* out, int valid_bytes) {
  __shared__ __align__(16) float4 s[5][128];
  __shared__ __align__(8) uint64_t bar;
  const int t = threadIdx.x;
  const char* src = reinterpret_cast<const char*>(g + t);
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], %1;" :: "r"(smem_u32(&bar)), "r"(128));
  __syncthreads();
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;"  :: "r"(smem_u32(&s[0][t])), "l"(src));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;"  :: "r"(smem_u32(&s[1][t])), "l"(src));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"(smem_u32(&s[2][t])), "l"(src));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(smem_u32(&s[3][t])), "l"(src));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(smem_u32(&s[4][t])), "l"(src), "r"(valid_bytes));
  asm volatile("cp.async.commit_group;");
  asm volatile("cp.async.wait_group 2;");
  asm volatile("cp.async.wait_all;");
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" :: "r"(smem_u32(&bar)));
  __syncthreads();
  out[t] = s[0][t].x + s[1][t].y + s[2][t].z + s[3][t].w + s[4][t].x;
}
