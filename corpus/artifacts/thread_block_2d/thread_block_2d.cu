// thread_block_2d.cu -- how a 2-D block's threads fall into warps, and what that does to a row-major read.
//
// A thread's linear index in its block is threadIdx.x + threadIdx.y * blockDim.x (+ threadIdx.z *
// blockDim.x * blockDim.y); warp w holds linear indices 32w .. 32w+31. So with blockDim.x = 32 a warp is
// one row of 32 columns; with blockDim.x = 8 a warp is 8 columns of 4 rows; with blockDim.x = 4, 4
// columns of 8 rows. Kernel: out[r][c] = 2 * in[r][c] over an 8192 x 8192 row-major fp32 matrix, with
// col = blockIdx.x * blockDim.x + threadIdx.x and row = ...y ("x->col"), or swapped ("x->row").
// Prints the warp map of each block shape, then CSV of bandwidth (median of 20 after 3 warm-up).
// Mode "ncu" launches each variant once (for sectors per request).
//
// Build: nvcc -O3 -arch=sm_90a thread_block_2d.cu -o thread_block_2d
// Run:   ./thread_block_2d > thread_block_2d.csv ; ./thread_block_2d ncu (under ncu)
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

template <int BX, int BY, bool XROW>
__global__ void __launch_bounds__(BX * BY) scale2d(const float* __restrict__ in, float* __restrict__ out, int M, int N) {
  const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
  const int row = XROW ? x : y, col = XROW ? y : x;
  if (row < M && col < N) out[(size_t)row * N + col] = 2.0f * in[(size_t)row * N + col];
}

struct V { const char* name; int bx, by; bool xrow; void (*k)(const float*, float*, int, int); };

int main(int argc, char** argv) {
  const bool ncu = argc > 1 && strcmp(argv[1], "ncu") == 0;
  const int M = 8192, N = 8192;
  const V vs[] = {
      {"32x8_x_col", 32, 8, false, scale2d<32, 8, false>},
      {"16x16_x_col", 16, 16, false, scale2d<16, 16, false>},
      {"8x32_x_col", 8, 32, false, scale2d<8, 32, false>},
      {"4x64_x_col", 4, 64, false, scale2d<4, 64, false>},
      {"1x256_x_col", 1, 256, false, scale2d<1, 256, false>},
      {"256x1_x_col", 256, 1, false, scale2d<256, 1, false>},
      {"32x8_x_row", 32, 8, true, scale2d<32, 8, true>},
  };
  if (!ncu) {  // warp map: for each warp of the block, the (row, column) span it covers
    for (const V& v : vs) {
      if (v.xrow) continue;
      fprintf(stderr, "block %dx%d: ", v.bx, v.by);
      for (int w = 0; w < 2; ++w) {
        int l0 = 32 * w, l1 = 32 * w + 31;
        fprintf(stderr, "warp %d = threadIdx.y %d..%d, threadIdx.x %d..%d; ", w, l0 / v.bx, l1 / v.bx,
                v.bx >= 32 ? l0 % v.bx : 0, v.bx >= 32 ? l1 % v.bx : v.bx - 1);
      }
      fprintf(stderr, "\n");
    }
  }
  float *in, *out;
  const size_t ne = (size_t)M * N;
  CK(cudaMalloc(&in, ne * 4));
  CK(cudaMalloc(&out, ne * 4));
  std::vector<float> h(ne);
  for (size_t i = 0; i < ne; ++i) h[i] = (float)(i % 1000);
  CK(cudaMemcpy(in, h.data(), ne * 4, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  if (!ncu) printf("variant,block_x,block_y,x_maps_to,median_us,GBps_read_plus_write,check\n");
  std::vector<float> back(ne);
  for (const V& v : vs) {
    // grid.x covers the dimension threadIdx.x walks (columns for x->col, rows for x->row)
    dim3 block(v.bx, v.by), grid((v.xrow ? M : N) / v.bx, (v.xrow ? N : M) / v.by);
    auto launch = [&] { v.k<<<grid, block>>>(in, out, M, N); };
    if (ncu) { launch(); CK(cudaDeviceSynchronize()); continue; }
    CK(cudaMemset(out, 0, ne * 4));
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(back.data(), out, ne * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < ne; ++i) bad += back[i] != 2.0f * h[i];
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
    printf("%s,%d,%d,%s,%.2f,%.1f,%s\n", v.name, v.bx, v.by, v.xrow ? "row" : "col", t[10] * 1e3,
           2.0 * ne * 4 / (t[10] * 1e-3) / 1e9, bad ? "FAIL" : "ok");
    fflush(stdout);
  }
  return 0;
}
