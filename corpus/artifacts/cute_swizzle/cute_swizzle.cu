// cute_swizzle.cu -- CuTe's Swizzle<B, M, S> worked out, then checked on shared memory.
//
// Host part (runs without a GPU: ./cute_swizzle host): our own re-statement of the formula in
// cute/swizzle.hpp, offset ^ ((offset & (((1<<B)-1) << (M+S))) >> S) for S > 0, applied to BYTE offsets
// (CuTe's swizzle_ptr applies the functor to the shared-memory address). It prints, for Swizzle<3,4,3>
// (128-byte swizzle) and Swizzle<2,4,3> (64-byte swizzle), which 16-byte chunk each logical chunk of
// each row lands in, and how many different 16-byte bank groups (4 banks each) 8 rows of one column hit.
//
// Device part: each warp reads 16 bytes per lane down a column of a 128-byte-pitch tile (lane l reads
// row l, chunk c), the access that breaks an unswizzled tile. Three address maps: identity,
// Swizzle<2,4,3> and Swizzle<3,4,3>. Reported: clock64 cycles per SM (per-SM clock), bytes per cycle
// per SM for all resident warps, and (under ncu) shared-memory wavefronts per request.
//
// Build: nvcc -O3 -arch=sm_90a cute_swizzle.cu -o cute_swizzle
// Run:   ./cute_swizzle host ; ./cute_swizzle > cute_swizzle.csv ; ./cute_swizzle ncu (under ncu)
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(call)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call, __FILE__, __LINE__,   \
              cudaGetErrorString(e_));                                             \
      exit(1);                                                                     \
    }                                                                             \
  } while (0)

// Swizzle<B,M,S>, S > 0: the B bits starting at bit M+S ("YYY") are XORed into the B bits starting at M.
template <int B, int M, int S>
__host__ __device__ constexpr uint32_t swz(uint32_t off) {
  static_assert(B >= 0 && M >= 0 && S >= B, "this restatement covers S >= B > = 0 only");
  return off ^ ((off & (((1u << B) - 1u) << (M + S))) >> S);
}

template <int B, int M, int S>
static void print_map(const char* name, int row_bytes) {
  const int chunks = row_bytes / 16;
  printf("%s on a %d-byte-pitch tile: physical 16-byte chunk of (row, logical chunk)\n", name, row_bytes);
  if (B > 0) printf("row  byte-offset-of-row  bits-%d..%d  ", M + S, M + S + B - 1);
  else printf("row  byte-offset-of-row  (no bits)  ");
  for (int c = 0; c < chunks; ++c) printf(" c%d", c);
  printf("\n");
  for (int r = 0; r < 8; ++r) {
    uint32_t base = r * row_bytes;
    printf("%3d  %18u  %9u  ", r, base, (base >> (M + S)) & ((1u << B) - 1u));
    for (int c = 0; c < chunks; ++c) {
      uint32_t o = base + c * 16;
      uint32_t p = swz<B, M, S>(o);
      printf(" %2u", (p % row_bytes) / 16);
      if (p / row_bytes != o / row_bytes) printf("!");  // would leave the row (never for these cases)
    }
    printf("\n");
  }
  // 8 consecutive rows, same logical chunk: distinct 16-byte bank groups ((addr / 16) % 8)
  for (int c = 0; c < chunks; ++c) {
    int seen = 0;
    for (int r = 0; r < 8; ++r) seen |= 1 << ((swz<B, M, S>(r * row_bytes + c * 16) / 16) % 8);
    printf("  column chunk %d over rows 0..7: %d distinct bank groups of 8\n", c, __builtin_popcount(seen));
  }
  if (chunks > 2)
    printf("  worked: offset 0x%03x (row 5, chunk 2) -> 0x%03x\n", 5 * row_bytes + 32, swz<B, M, S>(5 * row_bytes + 32));
}

constexpr int ROWS = 64, PITCH = 128, ITERS = 4096;

template <int MAP>
__device__ __forceinline__ uint32_t map_off(uint32_t off) {
  if constexpr (MAP == 0) return off;
  else if constexpr (MAP == 1) return swz<2, 4, 3>(off);
  else return swz<3, 4, 3>(off);
}

template <int MAP>
__global__ void column_reads(uint32_t* sink, long long* cycles, int* smid) {
  __shared__ alignas(1024) uint8_t tile[ROWS * PITCH];
  for (int i = threadIdx.x; i < ROWS * PITCH / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(tile)[i] = i;
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(tile);
  uint32_t acc = 0;
  long long t0 = clock64();
#pragma unroll 8
  for (int k = 0; k < ITERS; ++k) {
    const int row = (lane + 32 * ((k + warp) & 1)) & (ROWS - 1);
    const int chunk = (k + warp) & 7;
    const uint32_t addr = base + map_off<MAP>(row * PITCH + chunk * 16);
    uint32_t a, b, c, d;
    // ld.volatile: ptxas may not merge repeated loads of an address (the addresses repeat every 8
    // iterations, and with a plain ld.shared ptxas kept only 8 loads per warp for the whole loop)
    asm volatile("ld.volatile.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr) : "memory");
    acc += (a ^ b) + (c ^ d);
  }
  __syncthreads();
  long long t1 = clock64();
  if (acc == 0x12345678u) sink[0] = acc;
  if (threadIdx.x == 0) {
    cycles[2 * blockIdx.x] = t0;
    cycles[2 * blockIdx.x + 1] = t1;
    int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    smid[blockIdx.x] = id;
  }
}

int main(int argc, char** argv) {
  const bool host_only = argc > 1 && strcmp(argv[1], "host") == 0;
  const bool ncu = argc > 1 && strcmp(argv[1], "ncu") == 0;
  if (host_only) {
    print_map<0, 4, 3>("Swizzle<0,4,3> (identity)", 128);
    print_map<3, 4, 3>("Swizzle<3,4,3>", 128);
    print_map<2, 4, 3>("Swizzle<2,4,3>", 128);
    print_map<2, 4, 3>("Swizzle<2,4,3>", 64);
    print_map<1, 4, 3>("Swizzle<1,4,3>", 32);
    // compile-time checks of the hand-worked values in the page
    static_assert(swz<3, 4, 3>(0x2A0) == 0x2F0, "row 5 chunk 2 -> chunk 7");
    static_assert(swz<3, 4, 3>(0x380) == 0x3F0, "row 7 chunk 0 -> chunk 7");
    static_assert(swz<2, 4, 3>(0x2A0) == 0x2B0, "row 5 chunk 2 -> chunk 3 (128-byte pitch)");
    static_assert(swz<2, 4, 3>(0x160) == 0x140, "64-byte pitch: row 5 chunk 2 at 0x160, bits 7-8 = 0b10 -> chunk 0");
    return 0;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount, per_sm = 4, threads = 512, blocks = sms * per_sm;  // 64 warps/SM
  uint32_t* sink;
  long long* cyc;
  int* smid;
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&cyc, blocks * 2 * sizeof(long long)));
  CK(cudaMalloc(&smid, blocks * sizeof(int)));
  const char* names[3] = {"identity", "Swizzle<2,4,3>", "Swizzle<3,4,3>"};
  if (!ncu) printf("map,blocks,threads,warp_loads_per_SM,median_cycles_per_SM,cycles_per_warp_load,bytes_per_clk_per_SM,kernel_us\n");
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int m = 0; m < 3; ++m) {
    auto launch = [&] {
      if (m == 0) column_reads<0><<<blocks, threads>>>(sink, cyc, smid);
      else if (m == 1) column_reads<1><<<blocks, threads>>>(sink, cyc, smid);
      else column_reads<2><<<blocks, threads>>>(sink, cyc, smid);
    };
    if (ncu) { launch(); CK(cudaDeviceSynchronize()); continue; }
    for (int w = 0; w < 3; ++w) launch();
    std::vector<float> times;
    std::vector<double> per_sm_cycles;
    for (int r = 0; r < 11; ++r) {
      CK(cudaEventRecord(e0));
      launch();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      times.push_back(ms);
      std::vector<long long> hc(blocks * 2);
      std::vector<int> hs(blocks);
      CK(cudaMemcpy(hc.data(), cyc, hc.size() * 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hs.data(), smid, hs.size() * 4, cudaMemcpyDeviceToHost));
      std::vector<long long> lo(1024, -1), hi(1024, -1);
      std::vector<int> cnt(1024, 0);
      for (int b = 0; b < blocks; ++b) {
        int s = hs[b];
        if (lo[s] < 0 || hc[2 * b] < lo[s]) lo[s] = hc[2 * b];
        if (hc[2 * b + 1] > hi[s]) hi[s] = hc[2 * b + 1];
        cnt[s]++;
      }
      std::vector<double> span;
      for (int s = 0; s < 1024; ++s)
        if (cnt[s] == per_sm) span.push_back((double)(hi[s] - lo[s]));  // SMs that got exactly 4 blocks
      std::sort(span.begin(), span.end());
      if (!span.empty()) per_sm_cycles.push_back(span[span.size() / 2]);
    }
    CK(cudaGetLastError());
    std::sort(times.begin(), times.end());
    std::sort(per_sm_cycles.begin(), per_sm_cycles.end());
    const double cyc_med = per_sm_cycles[per_sm_cycles.size() / 2];
    const double warp_loads = (double)per_sm * (threads / 32) * ITERS;
    printf("%s,%d,%d,%.0f,%.0f,%.3f,%.1f,%.1f\n", names[m], blocks, threads, warp_loads, cyc_med, cyc_med / warp_loads,
           warp_loads * 512.0 / cyc_med, times[times.size() / 2] * 1e3);
    fflush(stdout);
  }
  return 0;
}
