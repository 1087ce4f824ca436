// barrier.cu -- barrier-heavy loop: __syncthreads() in every iteration of a tiny loop vs one barrier.
//
// Pathology: each 1024-thread block stages a 1024-float table in shared memory, then runs
// a 256-step loop whose body is one shared load and one FMA. The table is read-only after
// it is filled, yet the loop calls __syncthreads() every iteration, so all 32 warps
// line up at a barrier for every couple of instructions of work.
// Fix: one barrier after the table is filled; the loop runs barrier-free.
//
// Build: nvcc -O3 -arch=sm_90 barrier.cu -o barrier
// Run:   ./barrier bad|fixed [timed_reps]
// Metric: Gelem-steps/s = blocks*1024*STEPS / time / 1e9.
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
constexpr int STEPS = 256;

__global__ void __launch_bounds__(BS) barrier_bad(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float table[BS];
  const int t = threadIdx.x;
  table[t] = in[(size_t)blockIdx.x * BS + t];
  __syncthreads();
  float v = table[t];
  for (int k = 0; k < STEPS; ++k) {
    v = fmaf(v, 0.5f, table[(t + k) & (BS - 1)]);
    __syncthreads();  // unnecessary: the table is never written inside the loop
  }
  out[(size_t)blockIdx.x * BS + t] = v;
}

__global__ void __launch_bounds__(BS) barrier_fixed(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float table[BS];
  const int t = threadIdx.x;
  table[t] = in[(size_t)blockIdx.x * BS + t];
  __syncthreads();  // the only barrier needed
  float v = table[t];
  for (int k = 0; k < STEPS; ++k) v = fmaf(v, 0.5f, table[(t + k) & (BS - 1)]);
  out[(size_t)blockIdx.x * BS + t] = v;
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 30);
  const int blocks = num_sms() * 16;
  const size_t elems = (size_t)blocks * BS;
  float *in, *out;
  CK(cudaMalloc(&in, elems * sizeof(float)));
  CK(cudaMalloc(&out, elems * sizeof(float)));
  fill_device(in, elems, 41);
  auto launch = [&] {
    if (a.bad) barrier_bad<<<blocks, BS>>>(in, out);
    else barrier_fixed<<<blocks, BS>>>(in, out);
  };
  poison(out, elems * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(elems);
  CK(cudaMemcpy(h.data(), out, elems * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (size_t e = 0; e < elems && ok; ++e) ok = !std::isnan(h[e]);
  for (int b = 0; b < blocks && ok; b += 7)
    for (int t = 0; t < BS && ok; t += 33) {
      float v = rand_at((size_t)b * BS + t, 41);
      for (int k = 0; k < STEPS; ++k) v = fmaf(v, 0.5f, rand_at((size_t)b * BS + ((t + k) & (BS - 1)), 41));
      ok = (h[(size_t)b * BS + t] == v);
    }
  check(ok, "all outputs written; sampled outputs match host (bitwise)");
  float ms = median_ms(launch, a.reps);
  char shape[64];
  snprintf(shape, sizeof shape, "blocks=%d,block=1024,steps=256", blocks);
  report("barrier", a, "Gelem-steps/s", (double)elems * STEPS / (ms * 1e-3) / 1e9, ms, shape, "fp32");
  return 0;
}
