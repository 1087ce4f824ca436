// sparse_stores.cu -- sparse partial stores (4 useful bytes per 32-byte sector) vs dense stores.
//
// Pathology: the kernel writes one float into each 32-byte output record (array of
// structures, field 0 only), so every store request touches 32 sectors and each sector
// carries 4 written bytes; L2/DRAM must handle partially written sectors.
// Fix: write the field into its own contiguous array (structure of arrays): each warp's
// store covers 4 full sectors.
//
// Build: nvcc -O3 -arch=sm_90 sparse_stores.cu -o sparse_stores
// Run:   ./sparse_stores bad|fixed [timed_reps]
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
constexpr int REC = 8;  // floats per output record (32 bytes)

__global__ void sparse_stores_bad(const float* __restrict__ in, float* __restrict__ out_aos, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out_aos[(size_t)i * REC] = fmaf(3.0f, in[i], -1.0f);  // 4 bytes per 32-byte sector
}

__global__ void sparse_stores_fixed(const float* __restrict__ in, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaf(3.0f, in[i], -1.0f);  // dense, unit stride
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 50);
  const int n = 1 << 24;
  const size_t out_elems = a.bad ? (size_t)n * REC : (size_t)n;
  float *in = nullptr, *out = nullptr;
  CK(cudaMalloc(&in, (size_t)n * sizeof(float)));
  CK(cudaMalloc(&out, out_elems * sizeof(float)));
  fill_device(in, n, 23);
  const int bs = 256, grid = (n + bs - 1) / bs;
  auto launch = [&] {
    if (a.bad) sparse_stores_bad<<<grid, bs>>>(in, out, n);
    else sparse_stores_fixed<<<grid, bs>>>(in, out, n);
  };
  poison(out, out_elems * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(out_elems);
  CK(cudaMemcpy(h.data(), out, out_elems * sizeof(float), cudaMemcpyDeviceToHost));
  const int stride = a.bad ? REC : 1;
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) ok = (h[(size_t)i * stride] == fmaf(3.0f, rand_at(i, 23), -1.0f));
  check(ok, "field0[i] == 3*in[i]-1 for all i");
  float ms = median_ms(launch, a.reps);
  report("sparse_stores", a, "GB/s", 8.0 * n / (ms * 1e-3) / 1e9, ms, "N=16777216,record=32B", "fp32");
  return 0;
}
