// cp_async.cu -- tile staging: synchronous load-then-compute vs cp.async double buffering.
//
// Workload: a 16-tap FIR filter out[g] = sum_j w[j]*in[g+j] over 16M floats. A persistent
// grid (4 blocks of 256 threads per SM) walks 2048-float tiles; each tile plus a 16-float
// halo is staged in shared memory and each thread computes 8 outputs from it.
// Pathology: the bad kernel loads a tile through registers (ld.global -> st.shared),
// waits at a barrier, computes, waits again, and only then starts the next tile's loads:
// DRAM latency and the compute phase never overlap.
// Fix: cp.async (16-byte, L2-only) into two shared buffers; the copy of tile k+1 is in
// flight while tile k is being computed.
//
// Build: nvcc -O3 -arch=sm_90 cp_async.cu -o cp_async
// Run:   ./cp_async bad|fixed [timed_reps]
// Metric: GB/s = N*8 bytes / time.
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
constexpr int TILE = 2048;          // outputs per tile
constexpr int TAPS = 16;
constexpr int SPAN = TILE + TAPS;   // staged floats per tile (multiple of 4)
constexpr int CHUNKS = SPAN / 4;    // 16-byte chunks per tile
constexpr int BLOCKS_PER_SM = 4;

__constant__ float c_w[TAPS];

__device__ __forceinline__ void cp_async16(float* smem, const float* gmem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

__device__ __forceinline__ void fir_tile(const float* s, float* __restrict__ out, size_t base) {
#pragma unroll
  for (int u = 0; u < TILE / BS; ++u) {
    int t = threadIdx.x + u * BS;  // consecutive threads -> consecutive outputs: no bank conflicts
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < TAPS; ++j) acc = fmaf(c_w[j], s[t + j], acc);
    out[base + t] = acc;
  }
}

__global__ void __launch_bounds__(BS) cp_async_bad(const float* __restrict__ in, float* __restrict__ out, int ntiles) {
  __shared__ __align__(16) float s[SPAN];
  for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const size_t base = (size_t)tile * TILE;
    for (int c = threadIdx.x; c < CHUNKS; c += BS)
      reinterpret_cast<float4*>(s)[c] = reinterpret_cast<const float4*>(in + base)[c];
    __syncthreads();          // wait for the whole tile: nothing else in flight
    fir_tile(s, out, base);
    __syncthreads();          // before the next tile overwrites s
  }
}

__global__ void __launch_bounds__(BS) cp_async_fixed(const float* __restrict__ in, float* __restrict__ out, int ntiles) {
  __shared__ __align__(16) float s[2][SPAN];
  int tile = blockIdx.x, buf = 0;
  if (tile < ntiles)
    for (int c = threadIdx.x; c < CHUNKS; c += BS) cp_async16(&s[0][c * 4], in + (size_t)tile * TILE + c * 4);
  cp_async_commit();
  for (; tile < ntiles; tile += gridDim.x) {
    const int nxt = tile + gridDim.x;
    if (nxt < ntiles)  // prefetch the next tile into the other buffer
      for (int c = threadIdx.x; c < CHUNKS; c += BS) cp_async16(&s[buf ^ 1][c * 4], in + (size_t)nxt * TILE + c * 4);
    cp_async_commit();
    cp_async_wait_1();  // all groups but the newest are complete: this tile has landed
    __syncthreads();
    fir_tile(s[buf], out, (size_t)tile * TILE);
    __syncthreads();    // buffer `buf` is reused by the prefetch two iterations later
    buf ^= 1;
  }
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 50);
  const int n = 1 << 24, ntiles = n / TILE;
  float hw[TAPS];
  for (int j = 0; j < TAPS; ++j) hw[j] = (j % 2 ? -1.0f : 1.0f) / (j + 1);
  CK(cudaMemcpyToSymbol(c_w, hw, sizeof(hw)));
  float *in, *out;
  CK(cudaMalloc(&in, (size_t)(n + TAPS) * sizeof(float)));  // halo past the end
  CK(cudaMalloc(&out, (size_t)n * sizeof(float)));
  fill_device(in, n + TAPS, 53);
  const int grid = num_sms() * BLOCKS_PER_SM;
  auto launch = [&] {
    if (a.bad) cp_async_bad<<<grid, BS>>>(in, out, ntiles);
    else cp_async_fixed<<<grid, BS>>>(in, out, ntiles);
  };
  poison(out, (size_t)n * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), out, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int g = 0; g < n && ok; ++g) {
    float acc = 0.0f;
    for (int j = 0; j < TAPS; ++j) acc = fmaf(hw[j], rand_at((size_t)g + j, 53), acc);
    ok = (h[g] == acc);
  }
  check(ok, "FIR output matches host (bitwise)");
  float ms = median_ms(launch, a.reps);
  report("cp_async", a, "GB/s", 8.0 * n / (ms * 1e-3) / 1e9, ms, "N=16777216,taps=16,tile=2048", "fp32");
  return 0;
}
