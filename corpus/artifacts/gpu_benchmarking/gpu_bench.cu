// gpu_bench.cu: the benchmarking method of technique-gpu-benchmarking-method, applied on one GPU.
// 1) device facts, 2) cuBLAS bf16 GEMM: first call vs warm median (CUDA events), TFLOP/s,
// 3) a sustained GEMM loop (sample clocks/power with nvidia-smi meanwhile), 4) copy bandwidth on buffers >> L2.
// Build: nvcc -O3 -arch=sm_90 gpu_bench.cu -lcublas -o gpu_bench
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)
#define CB(x) do { cublasStatus_t st_ = (x); if (st_ != CUBLAS_STATUS_SUCCESS) { \
  std::fprintf(stderr, "%s:%d cublas %d\n", __FILE__, __LINE__, (int)st_); std::exit(1); } } while (0)

__global__ void fill(__nv_bfloat16* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(((i * 2654435761u) % 1000) * 1e-3f - 0.5f);
}

__global__ void copy4(const float4* __restrict__ x, float4* __restrict__ y, size_t n4) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x)
    y[i] = x[i];
}

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
  const int N = 8192;                      // square GEMM, M = N = K
  const int reps = 50, warmup = 10;
  const int sustained = argc > 1 ? std::atoi(argv[1]) : 3000;   // GEMMs in the sampled loop
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  std::printf("device=%s sm=%d cc=%d.%d l2_MB=%.1f mem_MiB=%zu\n", p.name, p.multiProcessorCount,
              p.major, p.minor, p.l2CacheSize / 1048576.0, p.totalGlobalMem >> 20);

  size_t elems = (size_t)N * N;
  __nv_bfloat16 *A, *B, *C;
  CK(cudaMalloc(&A, elems * 2)); CK(cudaMalloc(&B, elems * 2)); CK(cudaMalloc(&C, elems * 2));
  fill<<<1024, 256>>>(A, elems); fill<<<1024, 256>>>(B, elems); CK(cudaDeviceSynchronize());
  cublasHandle_t h; CB(cublasCreate(&h));
  cudaStream_t s; CK(cudaStreamCreate(&s)); CB(cublasSetStream(h, s));
  const float alpha = 1.f, beta = 0.f;
  auto gemm = [&]() {
    CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &alpha, A, CUDA_R_16BF, N, B, CUDA_R_16BF, N,
                    &beta, C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  cudaEvent_t t0, t1; CK(cudaEventCreate(&t0)); CK(cudaEventCreate(&t1));
  const double flop = 2.0 * N * N * (double)N;

  float first_ms;                            // the very first call: library init, heuristics, cold clocks
  CK(cudaEventRecord(t0, s)); gemm(); CK(cudaEventRecord(t1, s)); CK(cudaEventSynchronize(t1));
  CK(cudaEventElapsedTime(&first_ms, t0, t1));
  for (int i = 0; i < warmup; ++i) gemm();
  CK(cudaStreamSynchronize(s));
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(t0, s)); gemm(); CK(cudaEventRecord(t1, s)); CK(cudaEventSynchronize(t1));
    CK(cudaEventElapsedTime(&ms[i], t0, t1));
  }
  float med = median(ms), mn = *std::min_element(ms.begin(), ms.end()), mx = *std::max_element(ms.begin(), ms.end());
  std::printf("gemm_bf16 N=%d first_ms=%.3f median_ms=%.4f min_ms=%.4f max_ms=%.4f median_TFLOPs=%.1f\n",
              N, first_ms, med, mn, mx, flop / (med * 1e-3) / 1e12);

  std::printf("sustained_start\n"); std::fflush(stdout);
  CK(cudaEventRecord(t0, s));
  for (int i = 0; i < sustained; ++i) gemm();
  CK(cudaEventRecord(t1, s)); CK(cudaEventSynchronize(t1));
  float sus_ms; CK(cudaEventElapsedTime(&sus_ms, t0, t1));
  std::printf("sustained gemms=%d total_s=%.2f mean_TFLOPs=%.1f\n", sustained, sus_ms * 1e-3,
              flop * sustained / (sus_ms * 1e-3) / 1e12);
  std::fflush(stdout);

  // Copy bandwidth: 2 GiB in, 2 GiB out (far beyond the L2), grid of 4 blocks per SM.
  size_t bytes = (size_t)2 << 30, n4 = bytes / 16;
  float4 *x, *y; CK(cudaMalloc(&x, bytes)); CK(cudaMalloc(&y, bytes)); CK(cudaMemset(x, 0, bytes));
  int grid = 4 * p.multiProcessorCount;
  for (int i = 0; i < 5; ++i) copy4<<<grid, 512, 0, s>>>(x, y, n4);
  CK(cudaStreamSynchronize(s));
  std::vector<float> cms(20);
  for (auto& v : cms) {
    CK(cudaEventRecord(t0, s)); copy4<<<grid, 512, 0, s>>>(x, y, n4); CK(cudaEventRecord(t1, s));
    CK(cudaEventSynchronize(t1)); CK(cudaEventElapsedTime(&v, t0, t1));
  }
  float cmed = median(cms);
  std::printf("copy bytes_moved=%zu median_ms=%.4f TB_per_s=%.3f\n", 2 * bytes, cmed, 2.0 * bytes / (cmed * 1e-3) / 1e12);
  return 0;
}
