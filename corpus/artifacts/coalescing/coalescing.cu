// coalescing.cu -- uncoalesced (strided) global loads vs unit-stride loads.
//
// Pathology: records are stored as an array of structures (8 floats = 32 bytes per
// record) and the kernel needs only field 0. Each lane of a warp loads 4 bytes from a
// different 32-byte sector, so one warp-wide load touches 32 sectors and 7/8 of every
// fetched sector is wasted.
// Fix: keep the hot field in its own contiguous array (structure of arrays); a warp's
// load is then 128 contiguous bytes = 4 sectors.
//
// Build: nvcc -O3 -arch=sm_90 coalescing.cu -o coalescing
// Run:   ./coalescing bad|fixed [timed_reps]
// Metric: useful GB/s = (N*4 bytes read + N*4 bytes written) / kernel time.
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
constexpr int REC = 8;  // floats per record (32 bytes)

__global__ void coalescing_bad(const float* __restrict__ aos, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * aos[(size_t)i * REC] + 1.0f;  // stride of 32 bytes between lanes
}

__global__ void coalescing_fixed(const float* __restrict__ x, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i] + 1.0f;  // unit stride
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 50);
  const int n = 1 << 24;
  float *aos = nullptr, *x = nullptr, *out = nullptr;
  CK(cudaMalloc(&out, (size_t)n * sizeof(float)));
  if (a.bad) {
    CK(cudaMalloc(&aos, (size_t)n * REC * sizeof(float)));
    fill_device(aos, (size_t)n * REC, 11);
  } else {
    // Field 0 of the same records, stored contiguously: x[i] == aos[i*REC].
    std::vector<float> h(n);
    for (int i = 0; i < n; ++i) h[i] = rand_at((size_t)i * REC, 11);
    CK(cudaMalloc(&x, (size_t)n * sizeof(float)));
    CK(cudaMemcpy(x, h.data(), (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
  }
  const int bs = 256, grid = (n + bs - 1) / bs;
  auto launch = [&] {
    if (a.bad) coalescing_bad<<<grid, bs>>>(aos, out, n);
    else coalescing_fixed<<<grid, bs>>>(x, out, n);
  };
  poison(out, (size_t)n * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), out, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) ok = (h[i] == 2.0f * rand_at((size_t)i * REC, 11) + 1.0f);
  check(ok, "out[i] == 2*field0[i]+1 for all i");
  float ms = median_ms(launch, a.reps);
  report("coalescing", a, "GB/s", 8.0 * n / (ms * 1e-3) / 1e9, ms, "N=16777216,record=32B", "fp32");
  return 0;
}
