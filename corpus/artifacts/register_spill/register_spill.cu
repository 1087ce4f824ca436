// register_spill.cu -- register spilling forced by a register cap vs the same code without it.
//
// Pathology: each thread keeps 48 running accumulators (a statically indexed, fully
// unrolled array) across a 64-step loop. The bad kernel is capped at 32 registers with
// __maxnreg__(32), so ptxas spills the accumulators to local memory and every loop step
// reloads and re-stores them through L1 (local loads/stores show up as LG traffic).
// Fix: the identical kernel without the cap (ptxas reports no spill stores/loads).
//
// Build: nvcc -O3 -arch=sm_90 register_spill.cu -o register_spill   (-Xptxas -v shows the spills)
// Run:   ./register_spill bad|fixed [timed_reps]
// Metric: TFLOP/s = N * K * NACC * 2 / time.
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
constexpr int NACC = 48;
constexpr int K = 64;

__device__ __forceinline__ float coef(int j) { return 0.5f + 0.01f * j; }

__device__ __forceinline__ float spill_body(const float* __restrict__ in, int n, int i) {
  float acc[NACC];
#pragma unroll
  for (int j = 0; j < NACC; ++j) acc[j] = 0.001f * j;
#pragma unroll 1
  for (int k = 0; k < K; ++k) {
    float x = in[(size_t)k * n + i];
#pragma unroll
    for (int j = 0; j < NACC; ++j) acc[j] = fmaf(acc[j], x, coef(j));
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < NACC; ++j) s = fmaf(acc[j], (j & 1) ? -1.0f : 1.0f, s);
  return s;
}

__global__ void __maxnreg__(32) register_spill_bad(const float* __restrict__ in, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = spill_body(in, n, i);
}

__global__ void register_spill_fixed(const float* __restrict__ in, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = spill_body(in, n, i);
}

static float ref_body(int n, int i) {
  float acc[NACC];
  for (int j = 0; j < NACC; ++j) acc[j] = 0.001f * j;
  for (int k = 0; k < K; ++k) {
    float x = rand_at((size_t)k * n + i, 9);
    for (int j = 0; j < NACC; ++j) acc[j] = fmaf(acc[j], x, 0.5f + 0.01f * j);
  }
  float s = 0.0f;
  for (int j = 0; j < NACC; ++j) s = fmaf(acc[j], (j & 1) ? -1.0f : 1.0f, s);
  return s;
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 30);
  const int n = 1 << 19;
  float *in, *out;
  CK(cudaMalloc(&in, (size_t)K * n * sizeof(float)));
  CK(cudaMalloc(&out, (size_t)n * sizeof(float)));
  fill_device(in, (size_t)K * n, 9);
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, a.bad ? (const void*)register_spill_bad : (const void*)register_spill_fixed));
  printf("INFO regs=%d local_bytes=%zu\n", fa.numRegs, fa.localSizeBytes);
  const int bs = 256, grid = n / bs;
  auto launch = [&] {
    if (a.bad) register_spill_bad<<<grid, bs>>>(in, out, n);
    else register_spill_fixed<<<grid, bs>>>(in, out, n);
  };
  poison(out, (size_t)n * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), out, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) ok = !std::isnan(h[i]);
  for (int i = 0; i < n && ok; i += 131) {
    float r = ref_body(n, i);
    ok = fabsf(h[i] - r) <= 1e-4f * fmaxf(1.0f, fabsf(r));
  }
  check(ok, "all outputs written; sampled outputs match host reference");
  float ms = median_ms(launch, a.reps);
  report("register_spill", a, "TFLOP/s", (double)n * K * NACC * 2 / (ms * 1e-3) / 1e12, ms, "N=524288,K=64,acc=48", "fp32");
  return 0;
}
