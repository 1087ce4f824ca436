// small_grid.cu -- too few blocks for 132 SMs: one block per row of a 32-row reduction.
//
// Pathology: a row-sum over a 32 x 524288 matrix launches one 256-thread block per
// row, i.e. 32 blocks on a 132-SM GPU. 100 SMs idle, and the 32 busy ones each have
// only 8 warps to hide DRAM latency.
// Fix: split every row into 64 chunks (2048 blocks); each block reduces its chunk and
// adds the partial sum into the row total with one atomicAdd.
//
// Build: nvcc -O3 -arch=sm_90 small_grid.cu -o small_grid
// Run:   ./small_grid bad|fixed [timed_reps]
// Metric: GB/s = rows*cols*4 bytes / time (fixed time includes the memset of the 32 sums).
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
constexpr int ROWS = 32;
constexpr int COLS = 1 << 19;
constexpr int BS = 256;
constexpr int CHUNKS = 64;  // fixed variant: blocks per row

__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_part[BS / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) warp_part[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < BS / 32 ? warp_part[threadIdx.x] : 0.0f;
  if (threadIdx.x < 32) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;  // valid in thread 0
}

__global__ void small_grid_bad(const float* __restrict__ m, float* __restrict__ sums) {
  const float* row = m + (size_t)blockIdx.x * COLS;  // grid = ROWS blocks
  float v = 0.0f;
  for (int c = threadIdx.x; c < COLS; c += BS) v += row[c];
  v = block_sum(v);
  if (threadIdx.x == 0) sums[blockIdx.x] = v;
}

__global__ void small_grid_fixed(const float* __restrict__ m, float* __restrict__ sums) {
  const int chunk = COLS / CHUNKS;  // grid = (CHUNKS, ROWS)
  const float* p = m + (size_t)blockIdx.y * COLS + (size_t)blockIdx.x * chunk;
  float v = 0.0f;
  for (int c = threadIdx.x; c < chunk; c += BS) v += p[c];
  v = block_sum(v);
  if (threadIdx.x == 0) atomicAdd(&sums[blockIdx.y], v);
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 50);
  const size_t elems = (size_t)ROWS * COLS;
  float *m, *sums;
  CK(cudaMalloc(&m, elems * sizeof(float)));
  CK(cudaMalloc(&sums, ROWS * sizeof(float)));
  fill_device(m, elems, 7);
  auto launch = [&] {
    if (a.bad) {
      small_grid_bad<<<ROWS, BS>>>(m, sums);
    } else {
      CK(cudaMemsetAsync(sums, 0, ROWS * sizeof(float)));
      small_grid_fixed<<<dim3(CHUNKS, ROWS), BS>>>(m, sums);
    }
  };
  poison(sums, ROWS * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  float h[ROWS];
  CK(cudaMemcpy(h, sums, sizeof(h), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int r = 0; r < ROWS; ++r) {
    double ref = 0.0;
    for (int c = 0; c < COLS; ++c) ref += rand_at((size_t)r * COLS + c, 7);
    if (!(fabs(h[r] - ref) <= 1e-4 * fabs(ref))) ok = false;
  }
  check(ok, "row sums match float64 reference (rel 1e-4)");
  float ms = median_ms(launch, a.reps);
  int blocks = a.bad ? ROWS : ROWS * CHUNKS;
  printf("INFO grid_blocks=%d sms=%d\n", blocks, num_sms());
  report("small_grid", a, "GB/s", elems * 4.0 / (ms * 1e-3) / 1e9, ms, "32x524288", "fp32");
  return 0;
}
