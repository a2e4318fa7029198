// One source for CUDA and HIP: the few names that differ between the two runtimes.
#pragma once

#if defined(VX_EMUL)
#include "emul.h"
#elif defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define VX_RUNTIME "HIP"
typedef hipStream_t vxStream_t;
typedef hipError_t vxError_t;
#define vxSuccess hipSuccess
#define vxGetDeviceCount hipGetDeviceCount
#define vxSetDevice hipSetDevice
#define vxGetLastError hipGetLastError
#define vxGetErrorString hipGetErrorString
#define vxMemsetAsync hipMemsetAsync
// gfx9 (gfx90a, gfx94x) runs wave64.
#define VX_WARP 64
#define VX_SHFL_XOR(v, m) __shfl_xor((v), (m))
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define VX_RUNTIME "CUDA"
typedef cudaStream_t vxStream_t;
typedef cudaError_t vxError_t;
#define vxSuccess cudaSuccess
#define vxGetDeviceCount cudaGetDeviceCount
#define vxSetDevice cudaSetDevice
#define vxGetLastError cudaGetLastError
#define vxGetErrorString cudaGetErrorString
#define vxMemsetAsync cudaMemsetAsync
#define VX_WARP 32
#define VX_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#endif

#ifndef VX_EMUL
#define VX_DYN_SMEM(T, name) extern __shared__ T name[]
// Launch through a kernel pointer, so template arguments need no parentheses in the macro.
#define VX_LAUNCH(kernel, grid, block, smem, stream, ...) \
  kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#endif

#define VX_DEV __device__ __forceinline__
