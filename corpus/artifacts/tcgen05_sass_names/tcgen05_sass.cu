// Compile-only probe: the SASS that tcgen05 TMEM allocation, loads, MMA and commit lower to on sm_100a.
// Not meant to run (descriptors are placeholders); built with -cubin and disassembled.
#include <cstdint>

__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__global__ void tmem_alloc_ld_dealloc(uint32_t* out) {
  __shared__ uint32_t taddr;
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(smem(&taddr)));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;");
  }
  __syncthreads();
  uint32_t t = taddr, r0, r1, r2, r3;
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(t));
  asm volatile("tcgen05.wait::ld.sync.aligned;");
  out[threadIdx.x] = r0 + r1 + r2 + r3;
  __syncthreads();
  if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(t));
}

__global__ void mma_commit_1cta(uint64_t adesc, uint64_t bdesc, uint32_t idesc, uint32_t d_tmem, int acc) {
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}"
                 :: "r"(d_tmem), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(acc));
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(smem(&bar)));
  }
}

__global__ void __cluster_dims__(2, 1, 1) mma_commit_2cta(uint64_t adesc, uint64_t bdesc, uint32_t idesc, uint32_t d_tmem, int acc) {
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n\t}"
                 :: "r"(d_tmem), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(acc));
    asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(smem(&bar)));
  }
}
