// dram_triad.cu -- a DRAM-bound stream triad a = b + s*c, scalar vs float4 accesses.
//
// Both variants move the same 12 bytes per element and stay bound by HBM bandwidth;
// the fixed variant issues 16-byte vector loads/stores (4x fewer memory instructions)
// and gets a little closer to the bandwidth ceiling. It is the "nothing left to fix
// except bytes" reference point.
//
// Build: nvcc -O3 -arch=sm_90 dram_triad.cu -o dram_triad
// Run:   ./dram_triad bad|fixed [timed_reps]
// Metric: GB/s = 12*N bytes / time.
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
__global__ void dram_triad_bad(float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = fmaf(s, c[i], b[i]);
}

__global__ void dram_triad_fixed(float4* __restrict__ a, const float4* __restrict__ b, const float4* __restrict__ c, float s, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 bv = b[i], cv = c[i], r;
    r.x = fmaf(s, cv.x, bv.x);
    r.y = fmaf(s, cv.y, bv.y);
    r.z = fmaf(s, cv.z, bv.z);
    r.w = fmaf(s, cv.w, bv.w);
    a[i] = r;
  }
}

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv, 50);
  const int n = 1 << 25;  // multiple of 4
  const float s = 1.5f;
  float *a, *b, *c;
  CK(cudaMalloc(&a, (size_t)n * sizeof(float)));
  CK(cudaMalloc(&b, (size_t)n * sizeof(float)));
  CK(cudaMalloc(&c, (size_t)n * sizeof(float)));
  fill_device(b, n, 17);
  fill_device(c, n, 19);
  const int bs = 256;
  auto launch = [&] {
    if (args.bad) dram_triad_bad<<<(n + bs - 1) / bs, bs>>>(a, b, c, s, n);
    else dram_triad_fixed<<<(n / 4 + bs - 1) / bs, bs>>>((float4*)a, (const float4*)b, (const float4*)c, s, n / 4);
  };
  poison(a, (size_t)n * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), a, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) ok = (h[i] == fmaf(s, rand_at(i, 19), rand_at(i, 17)));
  check(ok, "a == b + s*c for all i");
  float ms = median_ms(launch, args.reps);
  report("dram_triad", args, "GB/s", 12.0 * n / (ms * 1e-3) / 1e9, ms, "N=33554432", "fp32");
  return 0;
}
