// atomics.cu -- atomic contention: every thread atomically adds into one address vs privatized sums.
//
// Pathology: a global sum where each of 4M threads does atomicAdd(total, x). All of the
// atomics target one 4-byte word, so the L2 slice that owns it serializes them.
// Fix: each thread sums a grid-stride slice privately in a register, the warp combines
// its 32 partials with shuffles, and one lane per warp issues the atomic (~8.4K atomics
// instead of 4.2M).
// Inputs are multiples of 0.25 below 1 so every partial sum is exact in fp32 and the
// result is order independent.
//
// Build: nvcc -O3 -arch=sm_90 atomics.cu -o atomics
// Run:   ./atomics bad|fixed [timed_reps]
// Metric: Gelem/s = N / time / 1e9 (time includes the memset of the accumulator).
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
__global__ void atomics_bad(const float* __restrict__ x, float* total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(total, x[i]);  // 4M atomics on one word
}

__global__ void atomics_fixed(const float* __restrict__ x, float* total, int n) {
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(total, v);  // one atomic per warp
}

__global__ void quantize_quarters(float* p, int n) {  // values in {0, .25, .5, .75}
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = floorf(p[i] * 4.0f) * 0.25f;
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 20);
  const int n = 1 << 22;
  float *x, *total;
  CK(cudaMalloc(&x, (size_t)n * sizeof(float)));
  CK(cudaMalloc(&total, sizeof(float)));
  fill_device(x, n, 37);
  quantize_quarters<<<n / 256, 256>>>(x, n);
  CK(cudaGetLastError());
  const int bs = 256;
  const int fixed_grid = num_sms() * 8;
  auto launch = [&] {
    CK(cudaMemsetAsync(total, 0, sizeof(float)));
    if (a.bad) atomics_bad<<<n / bs, bs>>>(x, total, n);
    else atomics_fixed<<<fixed_grid, bs>>>(x, total, n);
  };
  poison(total, sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  float h;
  CK(cudaMemcpy(&h, total, sizeof(float), cudaMemcpyDeviceToHost));
  double ref = 0.0;
  for (int i = 0; i < n; ++i) ref += floorf(rand_at(i, 37) * 4.0f) * 0.25f;
  check((double)h == ref, "total equals exact sum");
  float ms = median_ms(launch, a.reps);
  printf("INFO atomics_issued=%d\n", a.bad ? n : fixed_grid * bs / 32);
  report("atomics", a, "Gelem/s", n / (ms * 1e-3) / 1e9, ms, "N=4194304", "fp32");
  return 0;
}
