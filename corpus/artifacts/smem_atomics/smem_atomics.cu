// smem_atomics.cu -- shared-memory atomic throughput by data type and by how the lanes' addresses
// fall on banks (the shared-memory counterpart of artifacts/atomics_dtype).
//
// Every block (SMs x 8 blocks of 256 threads, full occupancy) owns a 4 KB shared array; each thread
// issues K = 256 atomics into it, then the block copies the array out so the work is observable.
// Address modes (word index within the array; 8-byte types use 8-byte slots):
//   one       : every lane of every warp hits slot 0
//   distinct  : lane l hits slot l (32 different banks for 4-byte types)
//   bank32    : lane l hits word 32 * l (4-byte types) or 8-byte slot 16 * l: 32 different addresses,
//               all 128 bytes apart, so all in the same bank
//   warp8     : lane l hits slot (l % 8) (8 words; 4 lanes share each)
// Operations: int32 atomicAdd of the constant 1 ("int32") and of a per-lane value ("int32_var"), fp32 atomicAdd, uint64 atomicAdd, fp64 atomicAdd, __half2 atomicAdd,
// and a 32-bit atomicCAS loop that adds a float (the pattern for operations without a native atomic).
// Metric: G shared atomics / s over the whole GPU (lane-level operations / time).
//
// Build: nvcc -O3 -arch=sm_90a smem_atomics.cu -o smem_atomics
// Run:   ./smem_atomics > smem_atomics.csv ; ./smem_atomics ncu (under ncu: one launch per case)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define CK(call)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call, __FILE__, __LINE__,   \
              cudaGetErrorString(e_));                                             \
      exit(1);                                                                     \
    }                                                                             \
  } while (0)

enum Op { I32 = 0, F32, U64, F64, H2, CAS32, I32V };
static const char* kOp[] = {"int32", "fp32", "uint64", "fp64", "half2", "cas32_fp32", "int32_var"};
enum Mode { ONE = 0, DISTINCT, BANK32, WARP8 };
static const char* kMode[] = {"one", "distinct", "bank32", "warp8"};
constexpr int K = 256, SMEM_WORDS = 1024;  // 4 KB

__device__ __forceinline__ int slot(int mode, int lane) {
  switch (mode) {
    case ONE: return 0;
    case DISTINCT: return lane;
    case BANK32: return 32 * lane;  // words 0, 32, ..., 992: one bank for 4-byte slots
    default: return lane & 7;
  }
}

__device__ __forceinline__ void cas_add_float(float* p, float v) {
  unsigned* a = reinterpret_cast<unsigned*>(p);
  unsigned seen = *a, prev;
  do {
    prev = seen;
    seen = atomicCAS(a, prev, __float_as_uint(__uint_as_float(prev) + v));
  } while (seen != prev);
}

template <int OP>
__global__ void smem_atomics(unsigned* out, int mode) {
  __shared__ alignas(16) unsigned sm[SMEM_WORDS];
  for (int i = threadIdx.x; i < SMEM_WORDS; i += blockDim.x) sm[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int s = slot(mode, lane);
  // 8-byte types index 8-byte slots; bank32 uses every 16th slot (128-byte steps) to stay in 4 KB
  const int s8 = mode == BANK32 ? 16 * lane : s;
  for (int k = 0; k < K; ++k) {
    if constexpr (OP == I32) atomicAdd(reinterpret_cast<int*>(sm) + s, 1);
    else if constexpr (OP == F32) atomicAdd(reinterpret_cast<float*>(sm) + s, 1.0f);
    else if constexpr (OP == U64) atomicAdd(reinterpret_cast<unsigned long long*>(sm) + s8, 1ull);
    else if constexpr (OP == F64) atomicAdd(reinterpret_cast<double*>(sm) + s8, 1.0);
    else if constexpr (OP == H2) atomicAdd(reinterpret_cast<__half2*>(sm) + s, __floats2half2_rn(1.f, 1.f));
    else if constexpr (OP == CAS32) cas_add_float(reinterpret_cast<float*>(sm) + s, 1.0f);
    else atomicAdd(reinterpret_cast<int*>(sm) + s, (lane & 3) + 1);  // a value, not a constant
  }
  __syncthreads();
  for (int i = threadIdx.x; i < SMEM_WORDS; i += blockDim.x) out[blockIdx.x * SMEM_WORDS + i] = sm[i];
}

static void launch(int op, unsigned* out, int mode, int grid, int block) {
  switch (op) {
    case I32: smem_atomics<I32><<<grid, block>>>(out, mode); break;
    case F32: smem_atomics<F32><<<grid, block>>>(out, mode); break;
    case U64: smem_atomics<U64><<<grid, block>>>(out, mode); break;
    case F64: smem_atomics<F64><<<grid, block>>>(out, mode); break;
    case H2: smem_atomics<H2><<<grid, block>>>(out, mode); break;
    case CAS32: smem_atomics<CAS32><<<grid, block>>>(out, mode); break;
    default: smem_atomics<I32V><<<grid, block>>>(out, mode); break;
  }
}

int main(int argc, char** argv) {
  const bool ncu = argc > 1 && strcmp(argv[1], "ncu") == 0;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int block = 256, grid = prop.multiProcessorCount * 8;
  unsigned* out;
  CK(cudaMalloc(&out, (size_t)grid * SMEM_WORDS * sizeof(unsigned)));
  std::vector<unsigned> h((size_t)grid * SMEM_WORDS);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const double ops = (double)grid * block * K;
  if (!ncu) printf("op,mode,blocks,threads,atomics_per_thread,median_us,G_atomics_per_s\n");
  for (int op = I32; op <= I32V; ++op)
    for (int mode = ONE; mode <= WARP8; ++mode) {
      launch(op, out, mode, grid, block);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      if (ncu) continue;
      // check: block 0's total for int32 and fp32 must be 256 threads x K
      CK(cudaMemcpy(h.data(), out, SMEM_WORDS * sizeof(unsigned), cudaMemcpyDeviceToHost));
      if (op == I32 || op == F32 || op == CAS32 || op == I32V) {
        double want = 0;
        for (int t = 0; t < block; ++t) want += op == I32V ? (double)((t & 3) + 1) * K : (double)K;
        double tot = 0;
        for (int i = 0; i < SMEM_WORDS; ++i) {
          if (op == I32 || op == I32V) tot += (double)h[i];
          else { float f; memcpy(&f, &h[i], 4); tot += f; }
        }
        fprintf(stderr, "CHECK %s %s block0 total %.0f expected %.0f %s\n", kOp[op], kMode[mode], tot, want,
                tot == want ? "ok" : "MISMATCH");
      }
      std::vector<float> t(20);
      for (int w = 0; w < 3; ++w) launch(op, out, mode, grid, block);
      for (auto& x : t) {
        CK(cudaEventRecord(e0));
        launch(op, out, mode, grid, block);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&x, e0, e1));
      }
      std::sort(t.begin(), t.end());
      printf("%s,%s,%d,%d,%d,%.2f,%.2f\n", kOp[op], kMode[mode], grid, block, K, t[10] * 1e3,
             ops / (t[10] * 1e-3) / 1e9);
      fflush(stdout);
    }
  return 0;
}
