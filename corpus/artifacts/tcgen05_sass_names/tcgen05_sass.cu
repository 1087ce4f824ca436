// Compile-only probe: the SASS that tcgen05 TMEM allocation, loads, MMA and commit lower to on sm_100a.
// Not meant to run (descriptors are placeholders); built with -cubin and disassembled.
#include <cstdint>

#define G1 "cta_group::1"
#define G2 "cta_group::2"
#define SYNC_ALIGNED ".sync.aligned"

__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__global__ void tmem_alloc_ld_dealloc(uint32_t* out) {
  __shared__ uint32_t slot_word;
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc." G1 SYNC_ALIGNED ".shared::cta.b32 [%0], 32;" :: "r"(smem(&slot_word)));
    asm volatile("tcgen05.relinquish_alloc_permit." G1 SYNC_ALIGNED ";");
  }
  __syncthreads();
  uint32_t tmem_base = slot_word, v[4];
  asm volatile("tcgen05.ld" SYNC_ALIGNED ".32x32b.x4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(tmem_base));
  asm volatile("tcgen05.wait::ld" SYNC_ALIGNED ";");
  out[threadIdx.x] = v[0] + v[1] + v[2] + v[3];
  __syncthreads();
  if (threadIdx.x < 32) asm volatile("tcgen05.dealloc." G1 SYNC_ALIGNED ".b32 %0, 32;" :: "r"(tmem_base));
}

// One MMA (kind::f16) and its commit to an mbarrier, for one CTA and for a CTA pair (a kernel may not mix the two).
#define MMA_AND_COMMIT(GROUP)                                                                              \
  asm volatile("{\n\t.reg .pred keep;\n\tsetp.ne.b32 keep, %4, 0;\n\t"                                   \
               "tcgen05.mma." GROUP ".kind::f16 [%0], %1, %2, %3, keep;\n\t}"                            \
               :: "r"(d_col), "l"(a_desc), "l"(b_desc), "r"(instr_desc), "r"(accumulate));              \
  asm volatile("tcgen05.commit." GROUP ".mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(smem(&done_bar)))

__global__ void mma_commit_1cta(uint64_t a_desc, uint64_t b_desc, uint32_t instr_desc, uint32_t d_col, int accumulate) {
  __shared__ uint64_t done_bar;
  if (threadIdx.x == 0) { MMA_AND_COMMIT(G1); }
}

__global__ void __cluster_dims__(2, 1, 1) mma_commit_2cta(uint64_t a_desc, uint64_t b_desc, uint32_t instr_desc, uint32_t d_col,
                                                           int accumulate) {
  __shared__ uint64_t done_bar;
  if (threadIdx.x == 0) { MMA_AND_COMMIT(G2); }
}
