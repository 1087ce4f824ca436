// smem_occupancy.cu -- occupancy limited by shared memory: 160 KB staging tile vs 8 KB tile.
//
// Pathology: a 3-point stencil stages its input through dynamic shared memory. The bad
// launch asks for a 40960-float tile (~160 KB) per 256-thread block, so only one block
// (8 warps, 12.5% of 64) fits on an SM, too few loads in flight to cover DRAM latency.
// Fix: the same kernel with a 2048-float tile (~8 KB); eight blocks fit per SM and the
// warp limit, not shared memory, bounds occupancy.
//
// Build: nvcc -O3 -arch=sm_90 smem_occupancy.cu -o smem_occupancy
// Run:   ./smem_occupancy bad|fixed [timed_reps]
// Metric: GB/s = N*8 bytes / time.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

// ---------------------------------------------------------------------------
// Shared scaffolding (repeated in every bundle so each file stands alone).
// ---------------------------------------------------------------------------
#define CK(call)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "CUDA error: %s at %s:%d: %s\n", #call, __FILE__, __LINE__, \
              cudaGetErrorString(e_));                                            \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

// Deterministic integer hash -> float in [0,1); bit-identical on host and device.
__host__ __device__ inline float hrand(uint32_t x) {
  x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
  return (float)(x >> 8) * (1.0f / 16777216.0f);
}
__host__ __device__ inline float rand_at(size_t i, uint32_t seed) {
  return hrand((uint32_t)i * 2654435761u + seed);
}
__global__ void fill_rand(float* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = rand_at(i, seed);
}
[[maybe_unused]] static inline void fill_device(float* p, size_t n, uint32_t seed) {
  fill_rand<<<1024, 256>>>(p, n, seed);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
}
[[maybe_unused]] static inline void poison(void* p, size_t bytes) {  // 0xFF bytes = NaN for fp32
  CK(cudaMemset(p, 0xFF, bytes));
  CK(cudaDeviceSynchronize());
}

struct Args {
  bool bad;
  const char* variant;
  int reps;
};
[[maybe_unused]] static inline Args parse_args(int argc, char** argv, int default_reps) {
  if (argc < 2 || (strcmp(argv[1], "bad") != 0 && strcmp(argv[1], "fixed") != 0)) {
    fprintf(stderr, "usage: %s bad|fixed [timed_reps]\n", argv[0]);
    exit(64);
  }
  Args a;
  a.variant = argv[1];
  a.bad = strcmp(argv[1], "bad") == 0;
  a.reps = argc > 2 ? atoi(argv[2]) : default_reps;
  if (a.reps < 1) a.reps = 1;
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("DEVICE name=\"%s\" sms=%d cc=%d.%d\n", p.name, p.multiProcessorCount, p.major, p.minor);
  return a;
}
[[maybe_unused]] static inline int num_sms() {
  int d = 0, s = 0;
  CK(cudaGetDevice(&d));
  CK(cudaDeviceGetAttribute(&s, cudaDevAttrMultiProcessorCount, d));
  return s;
}

// Warm up, then time `reps` launches individually with CUDA events; return the median in ms.
template <class F>
[[maybe_unused]] static float median_ms(F&& launch, int reps) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  int warm = reps < 3 ? 1 : 3;
  for (int i = 0; i < warm; ++i) launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    CK(cudaEventElapsedTime(&t[i], e0, e1));
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return t[reps / 2];
}

[[maybe_unused]] static inline void check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "CHECK FAILED: %s\n", what);
    exit(2);
  }
  printf("CHECK ok: %s\n", what);
}

[[maybe_unused]] static inline void report(const char* bundle, const Args& a, const char* metric, double value,
                   double ms, const char* shape, const char* dtype) {
  printf("RESULT bundle=%s variant=%s metric=%s value=%.4g time_us=%.2f shape=%s dtype=%s\n",
         bundle, a.variant, metric, value, ms * 1e3, shape, dtype);
}
// ---------------------------------------------------------------------------
constexpr int BS = 256;

__device__ __forceinline__ void stencil_tiles(const float* __restrict__ in, float* __restrict__ out, int n, int tile) {
  extern __shared__ float s[];  // tile + 2 halo elements
  size_t base = (size_t)blockIdx.x * tile;
  for (int t = threadIdx.x; t < tile + 2; t += BS) {
    long long g = (long long)base - 1 + t;
    s[t] = (g >= 0 && g < n) ? in[g] : 0.0f;
  }
  __syncthreads();
  for (int t = threadIdx.x; t < tile; t += BS) {
    size_t g = base + t;
    if (g < (size_t)n) out[g] = (s[t] + s[t + 1] + s[t + 2]) * (1.0f / 3.0f);
  }
}

__global__ void __launch_bounds__(BS, 8) smem_occupancy_bad(const float* __restrict__ in, float* __restrict__ out, int n, int tile) {
  stencil_tiles(in, out, n, tile);
}
__global__ void __launch_bounds__(BS, 8) smem_occupancy_fixed(const float* __restrict__ in, float* __restrict__ out, int n, int tile) {
  stencil_tiles(in, out, n, tile);
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 50);
  const int n = 1 << 25;
  const int tile = a.bad ? 40960 : 2048;
  const size_t smem = (tile + 2) * sizeof(float);
  const void* fn = a.bad ? (const void*)smem_occupancy_bad : (const void*)smem_occupancy_fixed;
  CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, BS, smem));
  float *in, *out;
  CK(cudaMalloc(&in, (size_t)n * sizeof(float)));
  CK(cudaMalloc(&out, (size_t)n * sizeof(float)));
  fill_device(in, n, 13);
  const int grid = (n + tile - 1) / tile;
  auto launch = [&] {
    if (a.bad) smem_occupancy_bad<<<grid, BS, smem>>>(in, out, n, tile);
    else smem_occupancy_fixed<<<grid, BS, smem>>>(in, out, n, tile);
  };
  poison(out, (size_t)n * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), out, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) {
    float l = i > 0 ? rand_at(i - 1, 13) : 0.0f, c = rand_at(i, 13), r = i + 1 < n ? rand_at(i + 1, 13) : 0.0f;
    ok = fabsf(h[i] - (l + c + r) * (1.0f / 3.0f)) <= 1e-6f;
  }
  check(ok, "3-point stencil matches host");
  float ms = median_ms(launch, a.reps);
  printf("INFO tile=%d smem_bytes=%zu blocks_per_sm=%d grid=%d\n", tile, smem, per_sm, grid);
  report("smem_occupancy", a, "GB/s", 8.0 * n / (ms * 1e-3) / 1e9, ms, "N=33554432", "fp32");
  return 0;
}
