// Counter-behaviour probes for Nsight Compute on H200 (sm_90a). Each kernel isolates one behaviour:
// async copies (cp.async, 1-D TMA bulk copy) versus plain loads into shared memory, sectors per request,
// bank-conflict counters in kernels without shared memory, mma.sync / wgmma stall reasons,
// and instruction-cache pressure from a very long straight-line kernel.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <cuda_profiler_api.h>
#include <cuda_bf16.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)

constexpr int TPB = 256;             // threads per block for the copy kernels
constexpr int TILE_F4 = TPB;         // one float4 per thread per tile: 4 KiB tiles

// ---- 1. streaming copy: the reference picture of the memory chart -------------------------------
__global__ void k_copy(const float4* __restrict__ in, float4* __restrict__ out, size_t n4) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x)
    out[i] = in[i];
}

// ---- 2. strided 4-byte loads: sectors per request 4 (stride 1) vs 32 (stride 32) -----------------
__global__ void k_stride(const float* __restrict__ in, float* __restrict__ out, size_t n, int stride) {
  size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t idx = (t * (size_t)stride) % n;
  out[t] = in[idx] * 2.0f;
}

// ---- 3. tiles into shared memory three ways, then consumed from shared ---------------------------
__device__ __forceinline__ float consume(const float4* s) {
  float4 v = s[(threadIdx.x * 5) % TILE_F4];   // conflict-free permutation of the tile
  return v.x + v.y + v.z + v.w;
}

__global__ void k_tile_ldg(const float4* __restrict__ in, float* __restrict__ out, int tiles_per_block) {
  __shared__ float4 s[TILE_F4];
  float acc = 0.f;
  for (int t = 0; t < tiles_per_block; ++t) {
    size_t base = ((size_t)blockIdx.x * tiles_per_block + t) * TILE_F4;
    s[threadIdx.x] = in[base + threadIdx.x];          // LDG + STS
    __syncthreads();
    acc += consume(s);
    __syncthreads();
  }
  out[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = acc;
}

__global__ void k_tile_cpasync(const float4* __restrict__ in, float* __restrict__ out, int tiles_per_block) {
  __shared__ float4 s[TILE_F4];
  float acc = 0.f;
  unsigned saddr = (unsigned)__cvta_generic_to_shared(&s[threadIdx.x]);
  for (int t = 0; t < tiles_per_block; ++t) {
    size_t base = ((size_t)blockIdx.x * tiles_per_block + t) * TILE_F4;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(saddr), "l"(in + base + threadIdx.x));  // LDGSTS
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    acc += consume(s);
    __syncthreads();
  }
  out[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = acc;
}

__global__ void k_tile_bulk(const float4* __restrict__ in, float* __restrict__ out, int tiles_per_block) {
  __shared__ alignas(128) float4 s[TILE_F4];
  __shared__ alignas(8) unsigned long long bar;
  unsigned sbar = (unsigned)__cvta_generic_to_shared(&bar);
  unsigned sdst = (unsigned)__cvta_generic_to_shared(&s[0]);
  const unsigned bytes = TILE_F4 * sizeof(float4);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(sbar));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  float acc = 0.f;
  unsigned phase = 0;
  for (int t = 0; t < tiles_per_block; ++t) {
    size_t base = ((size_t)blockIdx.x * tiles_per_block + t) * TILE_F4;
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(sbar), "r"(bytes) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                   :: "r"(sdst), "l"(in + base), "r"(bytes), "r"(sbar) : "memory");          // UBLKCP
    }
    asm volatile("{\n.reg .pred p;\nWAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT_%=;\n}\n" :: "r"(sbar), "r"(phase) : "memory");
    phase ^= 1;
    acc += consume(s);
    __syncthreads();
  }
  out[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = acc;
}

// ---- 4. no shared memory at all, but traffic through the L1TEX data stage ------------------------
// 4a: local memory (dynamically indexed per-thread array lives in local memory)
__global__ void k_local(const int* __restrict__ idx, float* __restrict__ out, int iters) {
  float a[64];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int i = 0; i < 64; ++i) a[i] = (float)(i + t);
  float acc = 0.f;
  for (int k = 0; k < iters; ++k) {
    int j = idx[(t + k) & 1023] & 63;
    acc += a[j];
    a[(j * 7) & 63] = acc;
  }
  out[t] = acc;
}
// 4b: global atomics, one address per warp (all lanes same address) and one per lane
__global__ void k_atomic(float* __restrict__ buf, int iters, int per_lane) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int addr = per_lane ? t : (t >> 5);
  for (int k = 0; k < iters; ++k) atomicAdd(&buf[addr & ((1 << 20) - 1)], 1.0f);
}
// 4c: L1-resident global loads with a 128-byte stride between lanes (same 4-byte column of each line)
__global__ void k_l1_stride(const float* __restrict__ in, float* __restrict__ out, int iters) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  float acc = 0.f;
  for (int k = 0; k < iters; ++k) acc += __ldca(&in[(lane * 32 + (k & 7) * 1024) & 8191]);   // 32 KiB window, L1 hits
  out[t] = acc;
}

// ---- 5. tensor-core instructions ----------------------------------------------------------------
__device__ __forceinline__ void mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// one accumulator: every HMMA waits for the previous one
__global__ void k_mma_dep(float* out, int iters) {
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3f803f80u ^ (threadIdx.x + i);
  for (int i = 0; i < 2; ++i) b[i] = 0x3f803f80u ^ (threadIdx.x * 3 + i);
  float d[4] = {0, 0, 0, 0};
  for (int k = 0; k < iters; ++k) mma_bf16(d, a, b);
  out[blockIdx.x * blockDim.x + threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}
// eight independent accumulators
__global__ void k_mma_indep(float* out, int iters) {
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3f803f80u ^ (threadIdx.x + i);
  for (int i = 0; i < 2; ++i) b[i] = 0x3f803f80u ^ (threadIdx.x * 3 + i);
  float d[8][4] = {};
  for (int k = 0; k < iters; k += 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) mma_bf16(d[j], a, b);
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
// The 32 accumulator operands are spelled out by two small macros (register list and constraints).
#define WG_R4(a, b, c, d) "%" #a ", %" #b ", %" #c ", %" #d
#define WG_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
__device__ __forceinline__ void wgmma_m64n64k16(float* d, unsigned long long da, unsigned long long db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
    "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
    WG_R4(0, 1, 2, 3) ", " WG_R4(4, 5, 6, 7) ", " WG_R4(8, 9, 10, 11) ", " WG_R4(12, 13, 14, 15) ", "
    WG_R4(16, 17, 18, 19) ", " WG_R4(20, 21, 22, 23) ", " WG_R4(24, 25, 26, 27) ", " WG_R4(28, 29, 30, 31)
    "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
    : WG_F4(0), WG_F4(4), WG_F4(8), WG_F4(12), WG_F4(16), WG_F4(20), WG_F4(24), WG_F4(28)
    : "l"(da), "l"(db));
}
// shared-memory matrix descriptor, no swizzle (layout type 0); the operands' values do not matter here
__device__ __forceinline__ unsigned long long sdesc(unsigned saddr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((saddr >> 4) & 0x3FFF) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32);
}
// one warpgroup per block; group = wgmmas issued between waits (1: serialised, 8: batched)
__global__ void k_wgmma(float* out, int iters, int group) {
  __shared__ alignas(1024) __nv_bfloat16 sA[64 * 16], sB[64 * 16];
  for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) { sA[i] = __float2bfloat16(0.01f * (i & 7)); sB[i] = __float2bfloat16(0.02f); }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  unsigned long long da = sdesc((unsigned)__cvta_generic_to_shared(sA), 128, 256);
  unsigned long long db = sdesc((unsigned)__cvta_generic_to_shared(sB), 128, 256);
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  for (int k = 0; k < iters; k += group) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    for (int j = 0; j < group; ++j) wgmma_m64n64k16(d, da, db);
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
  float s = 0.f;
  for (int i = 0; i < 32; ++i) s += d[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// ---- 6. instruction cache: ~16k distinct straight-line FFMAs versus the same work in a loop ------
template <int C>
__device__ __forceinline__ float ffma_block(float x) {
#pragma unroll
  for (int i = 0; i < 4096; ++i) x = fmaf(x, 0.9999f, (float)(i * 4 + C) * 1e-9f);
  return x;
}
__global__ void k_icache_big(float* out, int reps) {
  float x = threadIdx.x * 1e-3f;
  for (int r = 0; r < reps; ++r) {
    x = ffma_block<0>(x); x = ffma_block<1>(x); x = ffma_block<2>(x); x = ffma_block<3>(x);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}
__global__ void k_icache_loop(float* out, int reps) {
  float x = threadIdx.x * 1e-3f;
  for (int r = 0; r < reps; ++r) {
#pragma unroll 16
    for (int i = 0; i < 16384; ++i) x = fmaf(x, 0.9999f, (float)(i & 1023) * 1e-7f);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

int main(int argc, char** argv) {
  int range_mode = argc > 1 && argv[1][0] == 'r';
  const size_t N = 1ull << 24;                 // 16M floats = 64 MiB per buffer
  float *in, *out, *buf; int* idx;
  CK(cudaMalloc(&in, N * 4)); CK(cudaMalloc(&out, N * 4)); CK(cudaMalloc(&buf, (1 << 20) * 4)); CK(cudaMalloc(&idx, 1024 * 4));
  CK(cudaMemset(in, 0, N * 4)); CK(cudaMemset(buf, 0, (1 << 20) * 4));
  int h_idx[1024]; for (int i = 0; i < 1024; ++i) h_idx[i] = (i * 2654435761u) >> 7;
  CK(cudaMemcpy(idx, h_idx, sizeof h_idx, cudaMemcpyHostToDevice));
  const int blocks = 132 * 8;
  if (range_mode) {
    cudaProfilerStart();
    k_copy<<<blocks, TPB>>>((const float4*)in, (float4*)out, N / 4);
    k_stride<<<(N / 32) / TPB, TPB>>>(in, out, N, 32);
    cudaProfilerStop();
    CK(cudaDeviceSynchronize());
    printf("range mode done\n");
    return 0;
  }
  const int tpb_tiles = (int)(N / 4 / TILE_F4 / blocks);       // tiles per block covering all of `in`
  k_copy<<<blocks, TPB>>>((const float4*)in, (float4*)out, N / 4);
  k_stride<<<(N / 32) / TPB, TPB>>>(in, out, N, 1);
  k_stride<<<(N / 32) / TPB, TPB>>>(in, out, N, 32);
  k_tile_ldg<<<blocks, TPB>>>((const float4*)in, out, tpb_tiles);
  k_tile_cpasync<<<blocks, TPB>>>((const float4*)in, out, tpb_tiles);
  k_tile_bulk<<<blocks, TPB>>>((const float4*)in, out, tpb_tiles);
  k_local<<<blocks, TPB>>>(idx, out, 256);
  k_atomic<<<blocks, TPB>>>(buf, 64, 0);
  k_atomic<<<blocks, TPB>>>(buf, 64, 1);
  k_l1_stride<<<blocks, TPB>>>(in, out, 256);
  k_mma_dep<<<132 * 4, 128>>>(out, 4096);
  k_mma_indep<<<132 * 4, 128>>>(out, 4096);
  k_wgmma<<<132, 128>>>(out, 2048, 1);
  k_wgmma<<<132, 128>>>(out, 2048, 8);
  k_icache_big<<<132 * 4, 128>>>(out, 2);
  k_icache_loop<<<132 * 4, 128>>>(out, 2);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  // plain timing of the mma kernels (achieved FLOP/s for the DCGM comparison)
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int v = 0; v < 4; ++v) {
    for (int w = 0; w < 2; ++w) {
      cudaEventRecord(e0);
      if (v == 0) k_mma_dep<<<132 * 4, 128>>>(out, 4096);
      if (v == 1) k_mma_indep<<<132 * 4, 128>>>(out, 4096);
      if (v == 2) k_wgmma<<<132, 128>>>(out, 2048, 1);
      if (v == 3) k_wgmma<<<132, 128>>>(out, 2048, 8);
      cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      double flop = v < 2 ? 132.0 * 4 * 4 * 4096 * (2.0 * 16 * 8 * 16)      // warps x mma x 4096 flop
                          : 132.0 * 2048 * (2.0 * 64 * 64 * 16);          // warpgroups x wgmma x 131072 flop
      if (w == 1) printf("timing variant=%d ms=%.4f TFLOPs=%.1f\n", v, ms, flop / (ms * 1e-3) / 1e12);
    }
  }
  printf("done\n");
  return 0;
}
