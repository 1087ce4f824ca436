// l2_persistence.cu -- does an L2 access policy window keep a reused buffer in L2 while other
// kernels stream far more data than L2 holds?
//
// Each iteration launches, on one stream: reuse_read (reads the reused buffer of R MB) and then
// stream_read (reads a 1 GiB buffer once, 17x the 60 MB L2). Three configurations per R:
//   alone    : reuse_read only (the buffer stays in L2 by itself when it fits)
//   streamed : reuse_read + stream_read, no policy
//   window   : as streamed, with cudaStreamAttributeAccessPolicyWindow on the stream covering the
//              reused buffer (hitProp = persisting, missProp = streaming, hitRatio = min(1, set-aside / R))
//              and cudaLimitPersistingL2CacheSize set to the device maximum
// The time of reuse_read is taken with events around it (median of 30 iterations after 5 warm-up), for
// two launch shapes of reuse_read: "wide" (SMs x 4 blocks of 512 threads, bandwidth-bound) and
// "narrow" (SMs x 1 block of 128 threads: few loads in flight, so L2 vs HBM latency sets its time).
// Then a hitRatio sweep for the narrow reader (32 MB: 0.25/0.5/0.75; 44 MB, larger than the set-aside:
// 0.5 and 1.0). Mode "ncu" runs 4 iterations per configuration.
//
// Build: nvcc -O3 -arch=sm_90a l2_persistence.cu -o l2_persistence
// Run:   ./l2_persistence > l2_persistence.csv ; ./l2_persistence ncu   (under ncu)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(call)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call, __FILE__, __LINE__,   \
              cudaGetErrorString(e_));                                             \
      exit(1);                                                                     \
    }                                                                             \
  } while (0)

__device__ __forceinline__ void sum_read(const float4* __restrict__ p, size_t n4, float* out) {
  float acc = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
    float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == -1.0f) out[blockIdx.x] = acc;  // never true for the non-negative data; keeps the loads
}
__global__ void reuse_read(const float4* __restrict__ p, size_t n4, float* out) { sum_read(p, n4, out); }
__global__ void stream_read(const float4* __restrict__ p, size_t n4, float* out) { sum_read(p, n4, out); }

int main(int argc, char** argv) {
  const bool ncu = argc > 1 && strcmp(argv[1], "ncu") == 0;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  fprintf(stderr, "device=%s l2=%d B persistingL2CacheMaxSize=%d B accessPolicyMaxWindowSize=%d B\n", prop.name,
          prop.l2CacheSize, prop.persistingL2CacheMaxSize, prop.accessPolicyMaxWindowSize);
  const size_t stream_bytes = (size_t)1 << 30;
  const int sizes_mb[] = {8, 16, 32, 44};
  const int iters = ncu ? 4 : 30, warm = ncu ? 0 : 5;
  const int grid = prop.multiProcessorCount * 4, block = 512;
  float *reuse, *strm, *out;
  CK(cudaMalloc(&reuse, (size_t)64 << 20));
  CK(cudaMalloc(&strm, stream_bytes));
  CK(cudaMalloc(&out, grid * sizeof(float)));
  CK(cudaMemset(reuse, 0x3F, (size_t)64 << 20));  // positive floats (0x3F3F3F3F = 0.747)
  CK(cudaMemset(strm, 0x3F, stream_bytes));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1, e2;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&e2));

  size_t setaside = 0;
  CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, (size_t)prop.persistingL2CacheMaxSize));
  CK(cudaDeviceGetLimit(&setaside, cudaLimitPersistingL2CacheSize));
  fprintf(stderr, "persisting set-aside now %zu B\n", setaside);
  if (!ncu) printf("reuse_MB,shape,config,hit_ratio,reuse_median_us,reuse_GBps,stream_median_us,iters\n");

  struct Case { int shape, mb, cfg; float ratio; };  // ratio < 0: min(1, set-aside / window)
  std::vector<Case> cases;
  for (int shape = 0; shape < 2; ++shape)
    for (int mb : sizes_mb)
      for (int cfg = 0; cfg < 3; ++cfg) cases.push_back({shape, mb, cfg, -1.f});
  // hitRatio sweep on the narrow reader: below the set-aside, and a window larger than the set-aside
  for (float r : {0.25f, 0.5f, 0.75f}) cases.push_back({1, 32, 2, r});
  for (float r : {0.5f, 1.0f}) cases.push_back({1, 44, 2, r});
  for (const Case& c : cases) {
    const int shape = c.shape, mb = c.mb, cfg = c.cfg;
    const int rgrid = shape == 0 ? grid : prop.multiProcessorCount, rblock = shape == 0 ? block : 128;
    const size_t bytes = (size_t)mb << 20;
    {
      cudaStreamAttrValue attr;
      memset(&attr, 0, sizeof(attr));
      float ratio = 0.f;
      if (cfg == 2) {
        ratio = c.ratio >= 0.f ? c.ratio : std::min(1.0f, (float)setaside / (float)bytes);
        attr.accessPolicyWindow.base_ptr = reuse;
        attr.accessPolicyWindow.num_bytes = std::min(bytes, (size_t)prop.accessPolicyMaxWindowSize);
        attr.accessPolicyWindow.hitRatio = ratio;
        attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
        attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
      }
      CK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr));  // num_bytes 0 = off
      CK(cudaCtxResetPersistingL2Cache());  // start each configuration with no persisting lines
      std::vector<float> tr, ts;
      for (int it = 0; it < warm + iters; ++it) {
        CK(cudaEventRecord(e0, s));
        reuse_read<<<rgrid, rblock, 0, s>>>((const float4*)reuse, bytes / 16, out);
        CK(cudaEventRecord(e1, s));
        if (cfg > 0) stream_read<<<grid, block, 0, s>>>((const float4*)strm, stream_bytes / 16, out);
        CK(cudaEventRecord(e2, s));
        CK(cudaEventSynchronize(e2));
        float a, b;
        CK(cudaEventElapsedTime(&a, e0, e1));
        CK(cudaEventElapsedTime(&b, e1, e2));
        if (it >= warm) { tr.push_back(a); ts.push_back(b); }
      }
      CK(cudaGetLastError());
      std::sort(tr.begin(), tr.end());
      std::sort(ts.begin(), ts.end());
      const char* name = cfg == 0 ? "alone" : (cfg == 1 ? "streamed" : "window");
      if (!ncu)
        printf("%d,%s,%s,%.3f,%.2f,%.1f,%.1f,%d\n", mb, shape ? "narrow" : "wide", name, ratio, tr[iters / 2] * 1e3,
               bytes / (tr[iters / 2] * 1e-3) / 1e9, cfg ? ts[iters / 2] * 1e3 : 0.0, iters);
      else
        fprintf(stderr, "ncu pass: %d MB %s\n", mb, name);
      fflush(stdout);
    }
  }
  cudaStreamAttrValue off;
  memset(&off, 0, sizeof(off));
  CK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &off));
  CK(cudaCtxResetPersistingL2Cache());
  CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
  return 0;
}
