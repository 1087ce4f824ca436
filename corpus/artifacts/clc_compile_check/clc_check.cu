#include <cuda/ptx>
#include <cstdint>
__global__ void k(int* out) {
  __shared__ alignas(16) uint4 resp;
  __shared__ alignas(8) uint64_t bar;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(&bar)));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 16;" :: "r"((unsigned)__cvta_generic_to_shared(&bar)));
    cuda::ptx::clusterlaunchcontrol_try_cancel(&resp, &bar);
  }
  __syncthreads();
  if (cuda::ptx::clusterlaunchcontrol_query_cancel_is_canceled(resp))
    out[threadIdx.x] = (int)cuda::ptx::clusterlaunchcontrol_query_cancel_get_first_ctaid_x<uint32_t>(resp);
}
