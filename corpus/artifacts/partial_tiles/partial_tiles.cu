// partial_tiles.cu -- the cost of handling partial (ragged) tiles in a tiled kernel.
//
// Kernel: out = 2 * in + 1 over a row-major fp32 M x N matrix with row pitch ld (elements), one
// 64 x 64 tile per CTA of 256 threads. Shapes: 8192 x 8192 (every tile full), 8228 x 8228 (128 full
// tiles per dimension plus a 36-wide remainder) and 8196 x 8196 (a 4-wide remainder: the last row and
// column of tiles are mostly empty), each ragged shape once with ld = N (rows only 16-byte aligned)
// and once with ld padded to a multiple of 32 floats (every row starts on a 128-byte line).
// N and ld are multiples of 4 so rows stay 16-byte aligned (TMA needs 16-byte strides).
// Variants:
//   plain     : float4 loads/stores with no bounds checks (correct only when M, N are multiples of 64)
//   pred      : scalar loads/stores, every element checked against M and N
//   pred_vec  : float4 loads/stores, each float4 checked (valid because N % 4 == 0)
//   fastpath  : one uniform test per CTA: interior tiles take the plain path, edge tiles the pred path
//   tma       : cp.async.bulk.tensor 2-D load into shared memory (out-of-bounds elements are filled
//               with zeros), compute in shared memory, TMA store (out-of-bounds elements are dropped)
// Metric: GB/s of useful bytes = 2 * M * N * 4 / time (median of 20 after 3 warm-up launches).
//
// Build: nvcc -O3 -arch=sm_90a partial_tiles.cu -o partial_tiles
// Run:   ./partial_tiles > partial_tiles.csv
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda/barrier>

#define CK(call)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call, __FILE__, __LINE__,   \
              cudaGetErrorString(e_));                                             \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

constexpr int T = 64;          // tile edge
constexpr int THREADS = 256;
using block_barrier = cuda::barrier<cuda::thread_scope_block>;
namespace cde = cuda::device::experimental;

__device__ __forceinline__ float4 op4(float4 v) {
  return make_float4(2.f * v.x + 1.f, 2.f * v.y + 1.f, 2.f * v.z + 1.f, 2.f * v.w + 1.f);
}

__device__ __forceinline__ void tile_plain(const float* in, float* out, int ld, int r0, int c0) {
#pragma unroll
  for (int k = 0; k < T * T / 4 / THREADS; ++k) {
    int f = threadIdx.x + k * THREADS;  // float4 index inside the tile: 16 per row
    int r = r0 + f / (T / 4), c = c0 + (f % (T / 4)) * 4;
    size_t g = (size_t)r * ld + c;
    reinterpret_cast<float4*>(out + g)[0] = op4(reinterpret_cast<const float4*>(in + g)[0]);
  }
}

__device__ __forceinline__ void tile_pred(const float* in, float* out, int M, int N, int ld, int r0, int c0) {
#pragma unroll 4
  for (int k = 0; k < T * T / THREADS; ++k) {
    int e = threadIdx.x + k * THREADS;
    int r = r0 + e / T, c = c0 + e % T;
    if (r < M && c < N) {
      size_t g = (size_t)r * ld + c;
      out[g] = 2.f * in[g] + 1.f;
    }
  }
}

__global__ void k_plain(const float* in, float* out, int M, int N, int ld) {
  tile_plain(in, out, ld, blockIdx.y * T, blockIdx.x * T);
}

__global__ void k_pred(const float* in, float* out, int M, int N, int ld) {
  tile_pred(in, out, M, N, ld, blockIdx.y * T, blockIdx.x * T);
}

__global__ void k_pred_vec(const float* in, float* out, int M, int N, int ld) {
  const int r0 = blockIdx.y * T, c0 = blockIdx.x * T;
#pragma unroll
  for (int k = 0; k < T * T / 4 / THREADS; ++k) {
    int f = threadIdx.x + k * THREADS;
    int r = r0 + f / (T / 4), c = c0 + (f % (T / 4)) * 4;
    if (r < M && c < N) {  // N % 4 == 0: c < N implies c + 3 < N
      size_t g = (size_t)r * ld + c;
      reinterpret_cast<float4*>(out + g)[0] = op4(reinterpret_cast<const float4*>(in + g)[0]);
    }
  }
}

__global__ void k_fastpath(const float* in, float* out, int M, int N, int ld) {
  const int r0 = blockIdx.y * T, c0 = blockIdx.x * T;
  if (r0 + T <= M && c0 + T <= N) tile_plain(in, out, ld, r0, c0);  // uniform per CTA
  else tile_pred(in, out, M, N, ld, r0, c0);
}

__global__ void k_tma(const __grid_constant__ CUtensorMap tin, const __grid_constant__ CUtensorMap tout) {
  __shared__ alignas(128) float tile[T * T];
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ block_barrier bar;
  const int c0 = blockIdx.x * T, r0 = blockIdx.y * T;
  if (threadIdx.x == 0) {
    init(&bar, blockDim.x);
    cde::fence_proxy_async_shared_cta();  // make the initialized barrier visible to the async proxy
  }
  __syncthreads();
  block_barrier::arrival_token tok;
  if (threadIdx.x == 0) {
    // coordinates are (column, row): innermost dimension first
    cde::cp_async_bulk_tensor_2d_global_to_shared(tile, &tin, c0, r0, bar);
    tok = cuda::device::barrier_arrive_tx(bar, 1, sizeof(tile));  // the full box, even when clipped
  } else {
    tok = bar.arrive();
  }
  bar.wait(std::move(tok));
  float4* t4 = reinterpret_cast<float4*>(tile);
#pragma unroll
  for (int k = 0; k < T * T / 4 / THREADS; ++k) t4[threadIdx.x + k * THREADS] = op4(t4[threadIdx.x + k * THREADS]);
  cde::fence_proxy_async_shared_cta();  // generic-proxy writes must be visible to the TMA store
  __syncthreads();
  if (threadIdx.x == 0) {
    cde::cp_async_bulk_tensor_2d_shared_to_global(&tout, c0, r0, tile);
    cde::cp_async_bulk_commit_group();
    cde::cp_async_bulk_wait_group_read<0>();  // smem must stay valid until the store has read it
  }
}

// cuTensorMapEncodeTiled is a driver API call; fetch it through the runtime so no -lcuda is needed.
using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static EncodeFn encode_fn() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess || !f) {
    fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
    exit(1);
  }
  return reinterpret_cast<EncodeFn>(f);
}

static CUtensorMap make_map(float* base, int M, int N, int ld) {
  static EncodeFn encode = encode_fn();
  CUtensorMap m;
  cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)M};
  cuuint64_t strides[1] = {(cuuint64_t)ld * sizeof(float)};  // bytes, dimension 1; must be a multiple of 16
  cuuint32_t box[2] = {T, T};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, estr,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r);
    exit(1);
  }
  return m;
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  fprintf(stderr, "device=%s sms=%d\n", prop.name, prop.multiProcessorCount);
  const int shapes[5][2] = {{8192, 8192}, {8228, 8228}, {8228, 8256}, {8196, 8196}, {8196, 8224}};  // {M = N, ld}
  const char* names[5] = {"plain", "pred", "pred_vec", "fastpath", "tma"};
  const size_t guard = 4096;  // floats after the output that must stay untouched
  const size_t maxe = (size_t)8228 * 8256;
  float *in, *out;
  CK(cudaMalloc(&in, maxe * sizeof(float)));
  CK(cudaMalloc(&out, (maxe + guard) * sizeof(float)));
  std::vector<float> h_in(maxe), h_out(maxe + guard);
  for (size_t i = 0; i < maxe; ++i) h_in[i] = (float)((i * 2654435761u) >> 20 & 1023) * 0.25f;
  CK(cudaMemcpy(in, h_in.data(), maxe * sizeof(float), cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  printf("shape_M,shape_N,ld,tiles,full_tiles,variant,median_us,min_us,useful_GBps,check\n");
  for (int s = 0; s < 5; ++s) {
    const int M = shapes[s][0], N = shapes[s][0], ld = shapes[s][1];
    const size_t ne = (size_t)M * ld;  // elements spanned, padding included
    dim3 grid((N + T - 1) / T, (M + T - 1) / T);
    const int tiles = grid.x * grid.y, full = (N / T) * (M / T);
    CUtensorMap tin = make_map(in, M, N, ld), tout = make_map(out, M, N, ld);
    for (int v = 0; v < 5; ++v) {
      if (v == 0 && (M % T || N % T)) continue;  // plain would run out of bounds
      auto launch = [&] {
        switch (v) {
          case 0: k_plain<<<grid, THREADS>>>(in, out, M, N, ld); break;
          case 1: k_pred<<<grid, THREADS>>>(in, out, M, N, ld); break;
          case 2: k_pred_vec<<<grid, THREADS>>>(in, out, M, N, ld); break;
          case 3: k_fastpath<<<grid, THREADS>>>(in, out, M, N, ld); break;
          default: k_tma<<<grid, THREADS>>>(tin, tout); break;
        }
      };
      CK(cudaMemset(out, 0xFF, (maxe + guard) * sizeof(float)));  // NaN everywhere
      launch();
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(h_out.data(), out, (ne + guard) * sizeof(float), cudaMemcpyDeviceToHost));
      size_t bad = 0;
      uint32_t ff = 0xFFFFFFFFu;
      for (size_t i = 0; i < ne; ++i) {
        if ((int)(i % ld) < N) bad += h_out[i] != 2.f * h_in[i] + 1.f;
        else bad += memcmp(&h_out[i], &ff, 4) != 0;  // padding columns must stay untouched
      }
      for (size_t i = ne; i < ne + guard; ++i) bad += memcmp(&h_out[i], &ff, 4) != 0;
      for (int w = 0; w < 3; ++w) launch();
      std::vector<float> t(20);
      for (auto& x : t) {
        CK(cudaEventRecord(e0));
        launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&x, e0, e1));
      }
      std::sort(t.begin(), t.end());
      const float med = t[10];
      printf("%d,%d,%d,%d,%d,%s,%.2f,%.2f,%.1f,%s\n", M, N, ld, tiles, full, names[v], med * 1e3, t[0] * 1e3,
             2.0 * M * N * 4 / (med * 1e-3) / 1e9, bad ? "FAIL" : "ok");
      if (bad) fprintf(stderr, "%s %dx%d: %zu wrong elements\n", names[v], M, N, bad);
      fflush(stdout);
    }
  }
  return 0;
}
