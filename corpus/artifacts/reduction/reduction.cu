// reduction.cu -- segmented sum: shared-memory tree with a barrier per level vs warp shuffles.
//
// Each 256-thread block sums 8 segments of 1024 floats (16384 segments, 64 MB in all).
// Every thread first loads one float4 of each of its block's 8 segments (all loads in
// flight together), so the reduction itself, not the load latency, decides the time.
// Pathology: each segment is then reduced through shared memory with the classic
// halving tree: 8 levels, each a shared store/load round trip and a __syncthreads(),
// with ever fewer active threads -- 72 block-wide barriers per block.
// Fix: reduce all 8 segments within each warp with __shfl_xor_sync (interleaved, no
// shared memory, no barriers), then one shared exchange of the warp partials, a single
// barrier, and a shuffle over 8-lane groups.
//
// Build: nvcc -O3 -arch=sm_90 reduction.cu -o reduction
// Run:   ./reduction bad|fixed [timed_reps]
// Metric: GB/s = N*4 bytes / time.
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
constexpr int BS = 256;
constexpr int SEG = 1024;  // floats per segment = BS * 4
constexpr int SPB = 8;     // segments per block
constexpr int NWARP = BS / 32;

__device__ __forceinline__ void load_segments(const float4* __restrict__ in, float (&x)[SPB]) {
#pragma unroll
  for (int g = 0; g < SPB; ++g) {
    float4 v = in[((size_t)blockIdx.x * SPB + g) * BS + threadIdx.x];
    x[g] = (v.x + v.y) + (v.z + v.w);
  }
}

__global__ void __launch_bounds__(BS) reduction_bad(const float4* __restrict__ in, float* __restrict__ out) {
  __shared__ float s[BS];
  float x[SPB];
  load_segments(in, x);
  for (int g = 0; g < SPB; ++g) {
    s[threadIdx.x] = x[g];
    __syncthreads();
    for (int stride = BS / 2; stride > 0; stride >>= 1) {  // 8 levels, 8 barriers
      if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x * SPB + g] = s[0];
    // s[0] is only rewritten by thread 0 itself, so the next segment can start at once.
  }
}

__global__ void __launch_bounds__(BS) reduction_fixed(const float4* __restrict__ in, float* __restrict__ out) {
  __shared__ float part[SPB][NWARP];
  float x[SPB];
  load_segments(in, x);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int g = 0; g < SPB; ++g) x[g] += __shfl_xor_sync(0xffffffffu, x[g], o);  // 8 independent trees
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
#pragma unroll
    for (int g = 0; g < SPB; ++g) part[g][warp] = x[g];
  __syncthreads();  // the only barrier
  if (threadIdx.x < SPB * NWARP) {  // 64 threads: 8-lane group per segment
    const int g = threadIdx.x / NWARP, j = threadIdx.x % NWARP;
    float y = part[g][j];
#pragma unroll
    for (int o = NWARP / 2; o > 0; o >>= 1) y += __shfl_xor_sync(0xffffffffu, y, o);
    if (j == 0) out[blockIdx.x * SPB + g] = y;
  }
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 50);
  const int segs = 16384;
  const size_t n = (size_t)segs * SEG;
  float *in, *out;
  CK(cudaMalloc(&in, n * sizeof(float)));
  CK(cudaMalloc(&out, segs * sizeof(float)));
  fill_device(in, n, 47);
  const int grid = segs / SPB;
  auto launch = [&] {
    if (a.bad) reduction_bad<<<grid, BS>>>((const float4*)in, out);
    else reduction_fixed<<<grid, BS>>>((const float4*)in, out);
  };
  poison(out, segs * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(segs);
  CK(cudaMemcpy(h.data(), out, segs * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int sgi = 0; sgi < segs && ok; ++sgi) {
    double ref = 0.0;
    for (int j = 0; j < SEG; ++j) ref += rand_at((size_t)sgi * SEG + j, 47);
    ok = fabs(h[sgi] - ref) <= 1e-5 * fabs(ref);
  }
  check(ok, "segment sums match float64 reference (rel 1e-5)");
  float ms = median_ms(launch, a.reps);
  report("reduction", a, "GB/s", n * 4.0 / (ms * 1e-3) / 1e9, ms, "segments=16384,segment=1024,per_block=8", "fp32");
  return 0;
}
