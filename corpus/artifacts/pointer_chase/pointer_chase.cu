// pointer_chase.cu -- long-scoreboard latency: dependent loads (pointer chase) vs independent loads.
//
// Pathology: 8192 threads each walk 1024 hops of a random linked list laid over a 64 MB
// pool (next[] and val[] are 16M entries each, well past L2). Every hop's address
// depends on the previous load, so each warp has at most one DRAM round trip in flight
// and sits in long-scoreboard stalls.
// Fix: the traversal order is flattened once into an index list (list[k][t]); the kernel
// then issues 16 independent index loads and 16 independent value gathers per batch,
// so 16 round trips overlap. Values are summed in the same order, so the sums are
// bit-identical to the chase.
//
// Build: nvcc -O3 -arch=sm_90 pointer_chase.cu -o pointer_chase
// Run:   ./pointer_chase bad|fixed [timed_reps]
// Metric: Mhops/s = chains*hops / time / 1e6.
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
constexpr int POOL = 1 << 24;
constexpr int CHAINS = 8192;
constexpr int HOPS = 1024;
constexpr int SPACING = POOL / CHAINS;  // > HOPS, so chains never overlap
constexpr int BATCH = 16;
constexpr int BS = 64;

__global__ void pointer_chase_bad(const int* __restrict__ next, const float* __restrict__ val,
                                  const int* __restrict__ start, float* __restrict__ out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int i = start[t];
  float s = 0.0f;
  for (int k = 0; k < HOPS; ++k) {
    i = next[i];  // address of the next load depends on this one
    s += val[i];
  }
  out[t] = s;
}

__global__ void pointer_chase_fixed(const int* __restrict__ list, const float* __restrict__ val,
                                    float* __restrict__ out) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0.0f;
  for (int k = 0; k < HOPS; k += BATCH) {
    int idx[BATCH];
    float v[BATCH];
#pragma unroll
    for (int u = 0; u < BATCH; ++u) idx[u] = list[(size_t)(k + u) * CHAINS + t];  // coalesced
#pragma unroll
    for (int u = 0; u < BATCH; ++u) v[u] = val[idx[u]];  // independent gathers
#pragma unroll
    for (int u = 0; u < BATCH; ++u) s += v[u];  // same summation order as the chase
  }
  out[t] = s;
}

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv, 20);
  // One random cycle through the pool: order[] is a random permutation, next[order[k]] = order[k+1].
  std::vector<int> order(POOL);
  for (int i = 0; i < POOL; ++i) order[i] = i;
  uint64_t st = 0x9E3779B97F4A7C15ull;
  for (int i = POOL - 1; i > 0; --i) {
    st ^= st << 13; st ^= st >> 7; st ^= st << 17;
    int j = (int)(st % (uint64_t)(i + 1));
    std::swap(order[i], order[j]);
  }
  float *val, *out;
  CK(cudaMalloc(&val, (size_t)POOL * sizeof(float)));
  CK(cudaMalloc(&out, CHAINS * sizeof(float)));
  fill_device(val, POOL, 29);
  int *next = nullptr, *start = nullptr, *list = nullptr;
  if (a.bad) {
    std::vector<int> hnext(POOL), hstart(CHAINS);
    for (int k = 0; k < POOL; ++k) hnext[order[k]] = order[(k + 1) % POOL];
    for (int t = 0; t < CHAINS; ++t) hstart[t] = order[(size_t)t * SPACING];
    CK(cudaMalloc(&next, (size_t)POOL * sizeof(int)));
    CK(cudaMalloc(&start, CHAINS * sizeof(int)));
    CK(cudaMemcpy(next, hnext.data(), (size_t)POOL * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(start, hstart.data(), CHAINS * sizeof(int), cudaMemcpyHostToDevice));
  } else {
    std::vector<int> hl((size_t)HOPS * CHAINS);
    for (int k = 0; k < HOPS; ++k)
      for (int t = 0; t < CHAINS; ++t) hl[(size_t)k * CHAINS + t] = order[(size_t)t * SPACING + k + 1];
    CK(cudaMalloc(&list, hl.size() * sizeof(int)));
    CK(cudaMemcpy(list, hl.data(), hl.size() * sizeof(int), cudaMemcpyHostToDevice));
  }
  auto launch = [&] {
    if (a.bad) pointer_chase_bad<<<CHAINS / BS, BS>>>(next, val, start, out);
    else pointer_chase_fixed<<<CHAINS / BS, BS>>>(list, val, out);
  };
  poison(out, CHAINS * sizeof(float));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> h(CHAINS);
  CK(cudaMemcpy(h.data(), out, CHAINS * sizeof(float), cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int t = 0; t < CHAINS && ok; ++t) {
    float s = 0.0f;
    for (int k = 1; k <= HOPS; ++k) s += rand_at(order[(size_t)t * SPACING + k], 29);
    ok = (h[t] == s);
  }
  check(ok, "every chain sum equals the host walk (bitwise)");
  float ms = median_ms(launch, a.reps);
  report("pointer_chase", a, "Mhops/s", (double)CHAINS * HOPS / (ms * 1e-3) / 1e6, ms, "chains=8192,hops=1024,pool=2^24", "fp32");
  return 0;
}
