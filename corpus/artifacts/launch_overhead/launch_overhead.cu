// launch_overhead.cu -- 512 tiny kernels launched back to back vs one fused kernel.
//
// Pathology: a 512-step elementwise pipeline over 65536 floats is run as 512 separate
// launches alternating two tiny kernels (scale, shift). Each launch moves 512 KB and does
// a couple of flops per element; its cost is dominated by launch latency, the
// grid ramp-up/drain and the DRAM/L2 round trip of the intermediate array.
// Fix: fuse all 512 steps into one kernel that keeps the value in a register.
// Timing covers the whole sequence (first launch to last completion).
//
// Build: nvcc -O3 -arch=sm_90 launch_overhead.cu -o launch_overhead
// Run:   ./launch_overhead bad|fixed [timed_reps]
// Metric: us for the whole 512-step pipeline.
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
constexpr int N = 1 << 16;
constexpr int STEPS = 512;  // even: scale, odd: shift
constexpr int BS = 256;

__host__ __device__ __forceinline__ float step_scale(float x) { return fmaf(x, 0.999f, 0.001f); }
__host__ __device__ __forceinline__ float step_shift(float x) { return x + 0.0001f; }

__global__ void launch_overhead_bad_scale(float* __restrict__ x) {
  int i = blockIdx.x * BS + threadIdx.x;
  x[i] = step_scale(x[i]);
}
__global__ void launch_overhead_bad_shift(float* __restrict__ x) {
  int i = blockIdx.x * BS + threadIdx.x;
  x[i] = step_shift(x[i]);
}
__global__ void launch_overhead_fixed(float* __restrict__ x) {
  int i = blockIdx.x * BS + threadIdx.x;
  float v = x[i];
  for (int s = 0; s < STEPS; s += 2) v = step_shift(step_scale(v));
  x[i] = v;
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 30);
  float *x0, *x;
  CK(cudaMalloc(&x0, N * sizeof(float)));
  CK(cudaMalloc(&x, N * sizeof(float)));
  fill_device(x0, N, 59);
  // Each run restarts from x0 (the device-to-device copy is part of both timings).
  auto launch = [&] {
    CK(cudaMemcpyAsync(x, x0, N * sizeof(float), cudaMemcpyDeviceToDevice));
    if (a.bad) {
      for (int s = 0; s < STEPS; s += 2) {
        launch_overhead_bad_scale<<<N / BS, BS>>>(x);
        launch_overhead_bad_shift<<<N / BS, BS>>>(x);
      }
    } else {
      launch_overhead_fixed<<<N / BS, BS>>>(x);
    }
  };
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(N);
  CK(cudaMemcpy(h.data(), x, N * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < N && ok; ++i) {
    float v = rand_at(i, 59);
    for (int s = 0; s < STEPS; s += 2) v = step_shift(step_scale(v));
    ok = (h[i] == v);
  }
  check(ok, "pipeline output matches host (bitwise)");
  float ms = median_ms(launch, a.reps);
  printf("INFO launches_per_run=%d\n", a.bad ? STEPS : 1);
  report("launch_overhead", a, "us", ms * 1e3, ms, "N=65536,steps=512", "fp32");
  return 0;
}
