// CPU emulation of the slice of the CUDA/HIP runtime that kernels.cuh and vx_kernels.cu use,
// for tests only (compile vx_kernels.cu with g++ -DVX_EMUL): every GPU thread is a std::thread,
// __syncthreads a block barrier, a shuffle an exchange through a per-warp barrier, and
// blocks run one after another (so a function-local static is that block's shared memory).
// The kernels' source is unchanged; what this cannot show is device math accuracy (expf,
// sqrtf) and the memory model, which only a GPU run covers.
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static

// Few OS threads per block keep the emulation fast on a small CPU; the kernels' row loops
// are strided, so a smaller block only gives each thread more chunks.
#define VX_MAX_THREADS 128

#ifndef VX_EMUL_WARP
#define VX_EMUL_WARP 32
#endif

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct vx_uint3 { unsigned x, y, z; };
inline thread_local vx_uint3 threadIdx;
inline thread_local vx_uint3 blockIdx;
inline dim3 blockDim;

struct VxEmulBlock {
  std::unique_ptr<std::barrier<>> block;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  float lanes[1024];
  std::vector<uint64_t> dyn_smem;
};
inline VxEmulBlock* vx_emul_block = nullptr;

inline void __syncthreads() { vx_emul_block->block->arrive_and_wait(); }

inline float vx_emul_shfl_xor(float v, int mask) {
  const unsigned t = threadIdx.x;
  auto& warp = *vx_emul_block->warps[t / VX_EMUL_WARP];
  vx_emul_block->lanes[t] = v;
  warp.arrive_and_wait();
  const float r = vx_emul_block->lanes[t ^ mask];
  warp.arrive_and_wait();
  return r;
}

inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
inline int atomicMax(int* p, int v) {
  std::atomic_ref<int> a(*p);
  int old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {}
  return old;
}

struct __half { _Float16 v; };
inline __half __ushort_as_half(uint16_t u) { __half h; memcpy(&h.v, &u, 2); return h; }
inline uint16_t __half_as_ushort(__half h) { uint16_t u; memcpy(&u, &h.v, 2); return u; }
inline float __half2float(__half h) { return static_cast<float>(h.v); }
inline __half __float2half_rn(float f) { return {static_cast<_Float16>(f)}; }

#define VX_RUNTIME "CPU-emulated"
typedef void* vxStream_t;
typedef int vxError_t;
#define vxSuccess 0
inline int vxGetDeviceCount(int* n) { *n = 1; return 0; }
inline int vxSetDevice(int) { return 0; }
inline int vxGetLastError() { return 0; }
inline const char* vxGetErrorString(int) { return "emulated"; }
inline int vxMemsetAsync(void* p, int v, size_t n, vxStream_t) { memset(p, v, n); return 0; }
#define VX_WARP VX_EMUL_WARP
#define VX_SHFL_XOR(v, m) vx_emul_shfl_xor((v), (m))
#define VX_DYN_SMEM(T, name) T* name = reinterpret_cast<T*>(vx_emul_block->dyn_smem.data())

template <class... KArgs, class... Args>
void vx_emul_launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Args... args) {
  // One std::thread per GPU thread, reused for every block; a barrier separates blocks so
  // that the next block's writes to shared memory (statics) wait for the last one's reads.
  VxEmulBlock blk;
  blk.block = std::make_unique<std::barrier<>>(block.x);
  for (unsigned w = 0; w < (block.x + VX_EMUL_WARP - 1) / VX_EMUL_WARP; ++w)
    blk.warps.push_back(std::make_unique<std::barrier<>>(VX_EMUL_WARP));
  blk.dyn_smem.resize((smem + 7) / 8);
  vx_emul_block = &blk;
  blockDim = block;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block.x; ++t)
    threads.emplace_back([=, &blk] {
      threadIdx = {t, 0, 0};
      for (unsigned b = 0; b < grid.x; ++b) {
        blockIdx = {b, 0, 0};
        kernel(args...);
        blk.block->arrive_and_wait();
      }
    });
  for (auto& th : threads) th.join();
}
#define VX_LAUNCH(kernel, grid, block, smem, stream, ...) \
  vx_emul_launch(kernel, dim3(grid), dim3(block), smem, __VA_ARGS__)
