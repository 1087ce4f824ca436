// latency_ladder.cu -- load-to-use latency of shared memory, L1, L2 and HBM, measured with clock64 by a
// single thread chasing a dependent chain (each load's address is the previous load's value).
//
// Global chain: one 4-byte index per 128-byte line, lines visited in a random cyclic order (Sattolo's
// shuffle, fixed seed) over a footprint F; each hop therefore touches a new line and nothing can be
// prefetched or overlapped. Footprints from 8 KB to 1 GiB, loaded with ld.global.ca (L1 allowed) and
// ld.global.cg (L1 bypassed, so a small footprint measures L2). Footprints up to 64 MB get one full
// warm-up pass over the chain before timing; larger ones none, and each repetition starts at a
// different point of the chain so that it touches lines no earlier repetition touched. Timed: 8,192 hops.
// Shared chain: random cyclic order over the 4-byte words of a 32 KB shared array, ld.shared.
// This complements artifacts/pointer_chase, which measures throughput of many chains, not latency.
//
// Build: nvcc -O3 -arch=sm_90a latency_ladder.cu -o latency_ladder
// Run:   ./latency_ladder > latency_ladder.csv
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <random>
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

constexpr int HOPS = 8192;

template <bool CG>
__device__ __forceinline__ uint32_t ld_idx(const uint32_t* p) {
  uint32_t v;
  if constexpr (CG) asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <bool CG>
__global__ void chase_global(const uint32_t* chain, uint32_t start, long long warm_hops, long long* out_cycles,
                             uint32_t* out_idx) {
  uint32_t idx = start;
  for (long long h = 0; h < warm_hops; ++h) idx = ld_idx<CG>(chain + idx);
  long long t0 = clock64();
#pragma unroll 16
  for (int h = 0; h < HOPS; ++h) idx = ld_idx<CG>(chain + idx);
  long long t1 = clock64();
  out_cycles[0] = t1 - t0;
  out_idx[0] = idx;
}

__global__ void chase_shared(const uint32_t* order, long long* out_cycles, uint32_t* out_idx) {
  __shared__ uint32_t s[8192];  // 32 KB
  for (int i = 0; i < 8192; ++i) s[i] = order[i];
  uint32_t idx = 0;
  for (int h = 0; h < 8192; ++h) idx = s[idx];  // warm-up pass
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(s);
  long long t0 = clock64();
#pragma unroll 16
  for (int h = 0; h < HOPS; ++h) {
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(idx) : "r"(base + idx * 4) : "memory");
  }
  long long t1 = clock64();
  out_cycles[0] = t1 - t0;
  out_idx[0] = idx;
}

__global__ void build_chain(uint32_t* chain, const uint32_t* perm, size_t lines) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < lines; i += (size_t)gridDim.x * blockDim.x)
    chain[(size_t)perm[i] * 32] = perm[(i + 1) % lines] * 32;  // element index of the next line's word
}

static std::vector<uint32_t> cyclic_order(size_t n, uint32_t seed) {  // Sattolo: one cycle through all n
  std::vector<uint32_t> a(n);
  for (size_t i = 0; i < n; ++i) a[i] = (uint32_t)i;
  std::mt19937_64 rng(seed);
  for (size_t i = n - 1; i > 0; --i) {
    size_t j = rng() % i;
    std::swap(a[i], a[j]);
  }
  return a;
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int clk_khz = 0;
  CK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, 0));
  fprintf(stderr, "device=%s l2=%d B reported clockRate=%d kHz\n", prop.name, prop.l2CacheSize, clk_khz);
  long long* cyc;
  uint32_t* idx;
  CK(cudaMalloc(&cyc, sizeof(long long)));
  CK(cudaMalloc(&idx, sizeof(uint32_t)));
  printf("level,footprint_bytes,load,cycles_per_hop\n");

  // shared: successor table of a random cycle over 8192 words
  {
    std::vector<uint32_t> cyc_order = cyclic_order(8192, 7), next(8192);
    for (size_t i = 0; i < 8192; ++i) next[cyc_order[i]] = cyc_order[(i + 1) % 8192];
    uint32_t* d;
    CK(cudaMalloc(&d, 8192 * 4));
    CK(cudaMemcpy(d, next.data(), 8192 * 4, cudaMemcpyHostToDevice));
    std::vector<double> r;
    for (int rep = 0; rep < 5; ++rep) {
      cudaEvent_t a, b;
      CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
      CK(cudaEventRecord(a));
      chase_shared<<<1, 1>>>(d, cyc, idx);
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      long long h;
      CK(cudaMemcpy(&h, cyc, 8, cudaMemcpyDeviceToHost));
      r.push_back((double)h / HOPS);
    }
    std::sort(r.begin(), r.end());
    printf("shared,32768,ld.shared,%.1f\n", r[2]);
    CK(cudaFree(d));
  }

  const size_t kb = 1024, mb = kb * kb;
  const size_t sizes[] = {8 * kb, 64 * kb, 192 * kb, 512 * kb, 2 * mb, 8 * mb, 24 * mb, 28 * mb, 32 * mb,
                          36 * mb, 40 * mb, 56 * mb, 96 * mb, 256 * mb, 1024 * mb};
  const size_t maxb = 1024 * mb;
  uint32_t *chain, *perm;
  CK(cudaMalloc(&chain, maxb));
  CK(cudaMalloc(&perm, (maxb / 128) * 4));
  for (size_t f : sizes) {
    const size_t lines = f / 128;
    std::vector<uint32_t> order = cyclic_order(lines, 1234);
    CK(cudaMemcpy(perm, order.data(), lines * 4, cudaMemcpyHostToDevice));
    build_chain<<<1024, 256>>>(chain, perm, lines);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const bool fits = f <= 64 * mb;
    const long long warm = fits ? (long long)lines : 0;
    for (int cg = 0; cg < 2; ++cg) {
      std::vector<double> r;
      for (int rep = 0; rep < 3; ++rep) {
        // large footprints: a fresh stretch of the cycle for every run (8,192 hops of 2^18+ lines)
        const uint32_t start = fits ? 0u : order[((size_t)(cg * 3 + rep) * 40000) % lines] * 32u;
        if (cg) chase_global<true><<<1, 1>>>(chain, start, warm, cyc, idx);
        else chase_global<false><<<1, 1>>>(chain, start, warm, cyc, idx);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        long long h;
        CK(cudaMemcpy(&h, cyc, 8, cudaMemcpyDeviceToHost));
        r.push_back((double)h / HOPS);
      }
      std::sort(r.begin(), r.end());
      printf("global,%zu,%s,%.1f\n", f, cg ? "ld.global.cg" : "ld.global.ca", r[1]);
      fflush(stdout);
    }
  }
  return 0;
}
