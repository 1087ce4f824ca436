// bank_conflicts.cu -- shared-memory bank conflicts in a tiled transpose: 32x32 tile vs 32x33 tile.
//
// Pathology: the transpose stages a 32x32 fp32 tile in shared memory and reads it back
// column-wise. With a row pitch of 32 words every element of a column sits in the same
// bank, so each warp-wide shared load is a 32-way bank conflict.
// Fix: pad the row pitch to 33 words; a column then spans all 32 banks.
//
// Build: nvcc -O3 -arch=sm_90 bank_conflicts.cu -o bank_conflicts
// Run:   ./bank_conflicts bad|fixed [timed_reps]
// Metric: GB/s = 2 * N*N*4 bytes / kernel time.
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
constexpr int TILE = 32;
constexpr int ROWS = 8;  // block is 32 x 8 threads; each thread moves 4 elements

template <int PITCH>
__device__ __forceinline__ void transpose_tile(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float tile[TILE][PITCH];
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * n + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS) out[(size_t)(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void bank_conflicts_bad(const float* __restrict__ in, float* __restrict__ out, int n) {
  transpose_tile<TILE>(in, out, n);      // pitch 32 words: column reads hit one bank
}
__global__ void bank_conflicts_fixed(const float* __restrict__ in, float* __restrict__ out, int n) {
  transpose_tile<TILE + 1>(in, out, n);  // pitch 33 words: conflict-free
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 50);
  const int n = 4096;  // n x n matrix, multiple of TILE
  const size_t elems = (size_t)n * n;
  float *in, *out;
  CK(cudaMalloc(&in, elems * sizeof(float)));
  CK(cudaMalloc(&out, elems * sizeof(float)));
  fill_device(in, elems, 5);
  dim3 block(TILE, ROWS), grid(n / TILE, n / TILE);
  auto launch = [&] {
    if (a.bad) bank_conflicts_bad<<<grid, block>>>(in, out, n);
    else bank_conflicts_fixed<<<grid, block>>>(in, out, n);
  };
  poison(out, elems * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(elems);
  CK(cudaMemcpy(h.data(), out, elems * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int r = 0; r < n && ok; ++r)
    for (int c = 0; c < n && ok; ++c) ok = (h[(size_t)r * n + c] == rand_at((size_t)c * n + r, 5));
  check(ok, "out == transpose(in)");
  float ms = median_ms(launch, a.reps);
  report("bank_conflicts", a, "GB/s", 2.0 * elems * 4 / (ms * 1e-3) / 1e9, ms, "4096x4096", "fp32");
  return 0;
}
