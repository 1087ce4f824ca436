// tail_effect.cu -- wave quantization: a grid one block larger than a full wave, vs a persistent grid.
//
// Pathology: work comes in tiles of 32 rows x 1024 elements; one 1024-thread block per
// tile, 2 blocks resident per SM, so a full wave is 2*SMs blocks (264 on H200). The
// problem has 2*SMs+1 tiles: the last block runs alone in a second wave and the kernel
// takes up to two waves of time for 1.004 waves of work (1.46x the fixed time on H200).
// Fix: a persistent grid of exactly 2*SMs blocks walks the rows of all tiles with a
// grid-stride loop, so each block gets ceil(rows/blocks) rows and the tail is one row.
//
// Build: nvcc -O3 -arch=sm_90 tail_effect.cu -o tail_effect
// Run:   ./tail_effect bad|fixed [timed_reps]
// Metric: TFLOP/s = elements * ITERS * 2 / time.
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
constexpr int BS = 1024;
constexpr int ROWS_PER_TILE = 32;
constexpr int ITERS = 512;  // dependent FMAs per element (compute-heavy, uniform cost)

__device__ __forceinline__ float work(float x) {
#pragma unroll 16
  for (int k = 0; k < ITERS; ++k) x = fmaf(x, 0.999f, 0.001f);
  return x;
}

__global__ void __launch_bounds__(BS, 2) tail_effect_bad(const float* __restrict__ in, float* __restrict__ out) {
  // one block per tile; grid = number of tiles
  for (int r = 0; r < ROWS_PER_TILE; ++r) {
    size_t e = ((size_t)blockIdx.x * ROWS_PER_TILE + r) * BS + threadIdx.x;
    out[e] = work(in[e]);
  }
}

__global__ void __launch_bounds__(BS, 2) tail_effect_fixed(const float* __restrict__ in, float* __restrict__ out, int total_rows) {
  // persistent: grid = resident capacity; rows of all tiles handed out grid-stride
  for (int u = blockIdx.x; u < total_rows; u += gridDim.x) {
    size_t e = (size_t)u * BS + threadIdx.x;
    out[e] = work(in[e]);
  }
}

static float ref_work(float x) {
  for (int k = 0; k < ITERS; ++k) x = fmaf(x, 0.999f, 0.001f);
  return x;
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 30);
  int sms = num_sms(), per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tail_effect_bad, BS, 0));
  const int wave = sms * per_sm;
  const int tiles = wave + 1;  // one tile over a full wave
  const int total_rows = tiles * ROWS_PER_TILE;
  const size_t elems = (size_t)total_rows * BS;
  float *in, *out;
  CK(cudaMalloc(&in, elems * sizeof(float)));
  CK(cudaMalloc(&out, elems * sizeof(float)));
  fill_device(in, elems, 3);
  auto launch = [&] {
    if (a.bad) tail_effect_bad<<<tiles, BS>>>(in, out);
    else tail_effect_fixed<<<wave, BS>>>(in, out, total_rows);
  };
  poison(out, elems * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(elems);
  CK(cudaMemcpy(h.data(), out, elems * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (size_t e = 0; e < elems && ok; ++e) ok = !std::isnan(h[e]);
  for (size_t e = 0; e < elems && ok; e += 997) ok = fabsf(h[e] - ref_work(rand_at(e, 3))) <= 1e-5f;
  check(ok, "all outputs written; sampled outputs match host FMA chain");
  float ms = median_ms(launch, a.reps);
  printf("INFO blocks_per_sm=%d wave=%d tiles=%d grid=%d\n", per_sm, wave, tiles, a.bad ? tiles : wave);
  char shape[96];
  snprintf(shape, sizeof shape, "tiles=%d,rows_per_tile=32,row=1024,iters=512", tiles);
  report("tail_effect", a, "TFLOP/s", (double)elems * ITERS * 2 / (ms * 1e-3) / 1e12, ms, shape, "fp32");
  return 0;
}
