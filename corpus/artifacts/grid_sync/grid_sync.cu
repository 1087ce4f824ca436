// grid_sync.cu -- what one grid-wide barrier costs: cooperative_groups grid.sync() inside one
// cooperative launch vs ending the kernel and launching the next one (plain stream launches and a
// CUDA graph of the same launches).
//
// The work between barriers is deliberately tiny (each thread updates one float), so per-phase time
// is almost all barrier or launch cost. Each phase reads a neighbour's value written in the previous
// phase, so a missing barrier would change the result; the host checks it.
// Grids: 1 block of 256 threads per SM, full occupancy with 256-thread blocks (blocks/SM from the
// occupancy API), and 1 block of 1024 threads per SM.
//
// Build: nvcc -O3 -arch=sm_90a grid_sync.cu -o grid_sync
// Run:   ./grid_sync > grid_sync.csv
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define CK(call)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call, __FILE__, __LINE__,   \
              cudaGetErrorString(e_));                                             \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

// One phase: x_new[i] = 0.5 * x_old[(i + 1) % n] + 1, ping-ponging between two buffers.
__device__ __forceinline__ void phase(const float* src, float* dst, int n, int i) {
  if (i < n) dst[i] = 0.5f * src[(i + 1) % n] + 1.0f;
}

__global__ void phases_coop(float* a, float* b, int n, int phases) {
  cg::grid_group g = cg::this_grid();
  const int i = (int)g.thread_rank();
  for (int p = 0; p < phases; ++p) {
    phase((p & 1) ? b : a, (p & 1) ? a : b, n, i);
    g.sync();
  }
}

__global__ void phase_once(const float* src, float* dst, int n) {
  phase(src, dst, n, blockIdx.x * blockDim.x + threadIdx.x);
}

static float host_expected(int n, int phases, int idx) {  // same recurrence on the host for one element
  std::vector<float> x(n, 0.0f), y(n);
  for (int p = 0; p < phases; ++p) {
    for (int i = 0; i < n; ++i) y[i] = 0.5f * x[(i + 1) % n] + 1.0f;
    x.swap(y);
  }
  return x[idx];
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int coop = 0;
  CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
  const int sms = prop.multiProcessorCount;
  fprintf(stderr, "device=%s sms=%d cooperativeLaunch=%d\n", prop.name, sms, coop);
  if (!coop) return 3;

  int per_sm_256 = 0, per_sm_1024 = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_256, phases_coop, 256, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_1024, phases_coop, 1024, 0));
  struct G { const char* name; int blocks; int threads; };
  std::vector<G> grids = {{"1x256_per_SM", sms, 256},
                          {"full_occupancy_256", sms * per_sm_256, 256},
                          {"1x1024_per_SM", sms * std::min(per_sm_1024, 1), 1024}};
  fprintf(stderr, "occupancy: %d blocks/SM of 256, %d blocks/SM of 1024\n", per_sm_256, per_sm_1024);

  const int P = 1000;
  float *a, *b;
  const int nmax = sms * 2048;
  CK(cudaMalloc(&a, nmax * sizeof(float)));
  CK(cudaMalloc(&b, nmax * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  printf("grid,blocks,threads_per_block,method,phases,median_ms,us_per_phase\n");
  for (const G& g : grids) {
    int n = g.blocks * g.threads;
    int phases = P;
    void* args[] = {&a, &b, &n, &phases};

    // correctness of the cooperative version after an odd number of phases (result lands in b)
    int odd = 7;
    void* args_odd[] = {&a, &b, &n, &odd};
    CK(cudaMemset(a, 0, n * sizeof(float)));
    CK(cudaMemset(b, 0, n * sizeof(float)));
    CK(cudaLaunchCooperativeKernel((void*)phases_coop, g.blocks, g.threads, args_odd, 0, 0));
    CK(cudaDeviceSynchronize());
    float got;
    CK(cudaMemcpy(&got, b + 5, sizeof(float), cudaMemcpyDeviceToHost));
    float want = host_expected(n, odd, 5);
    fprintf(stderr, "CHECK %s coop 7 phases: %f expected %f %s\n", g.name, got, want, got == want ? "ok" : "MISMATCH");

    auto coop_run = [&] {
      CK(cudaLaunchCooperativeKernel((void*)phases_coop, g.blocks, g.threads, args, 0, s));
    };
    auto relaunch = [&] {
      for (int p = 0; p < P; ++p)
        phase_once<<<g.blocks, g.threads, 0, s>>>((p & 1) ? b : a, (p & 1) ? a : b, n);
    };
    // CUDA graph holding the same P launches
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    relaunch();
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    auto graph_run = [&] { CK(cudaGraphLaunch(exec, s)); };
    // baseline: one cooperative launch with a single phase (launch cost of the cooperative kernel)
    int one = 1;
    void* args_one[] = {&a, &b, &n, &one};
    auto coop_one = [&] {
      CK(cudaLaunchCooperativeKernel((void*)phases_coop, g.blocks, g.threads, args_one, 0, s));
    };

    // cudaEventRecord on the legacy stream would not order with s; record on s instead
    auto timed = [&](auto&& f, int reps) {
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      for (int i = 0; i < 3; ++i) f();
      CK(cudaStreamSynchronize(s));
      std::vector<float> t(reps);
      for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(e0, s));
        f();
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[r], e0, e1));
      }
      std::sort(t.begin(), t.end());
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
      return t[reps / 2];
    };
    float t_coop = timed(coop_run, 20);
    float t_one = timed(coop_one, 20);
    float t_re = timed(relaunch, 20);
    float t_gr = timed(graph_run, 20);
    printf("%s,%d,%d,coop_grid_sync,%d,%.4f,%.3f\n", g.name, g.blocks, g.threads, P, t_coop, t_coop * 1e3 / P);
    printf("%s,%d,%d,coop_single_phase,1,%.4f,%.3f\n", g.name, g.blocks, g.threads, t_one, t_one * 1e3);
    printf("%s,%d,%d,stream_relaunch,%d,%.4f,%.3f\n", g.name, g.blocks, g.threads, P, t_re, t_re * 1e3 / P);
    printf("%s,%d,%d,graph_relaunch,%d,%.4f,%.3f\n", g.name, g.blocks, g.threads, P, t_gr, t_gr * 1e3 / P);
    fflush(stdout);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
  }
  return 0;
}
