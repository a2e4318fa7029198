// The extern "C" launchers of the kernel libraries (vx_cpu.cpp; vx_kernels.cu, whose
// argument lists library.py's SIGNATURES mirror): declared once for the C++ callers (the
// torch operator kernels of op_csrc/) and checked against vx_cpu.cpp's definitions, which
// include this header. Each returns 0, or 1 with vx_last_error() saying why.
#pragma once
#include <stdint.h>

namespace vx {
struct Variant;
}

extern "C" {
const char* vx_last_error(void);
int vx_rms_norm(void* out, const void* x, const void* weight, int64_t rows, int64_t hidden,
                int64_t x_stride, int64_t var_size, float eps, int dtype, int wdtype, void* stream);
int vx_fused_add_rms_norm(void* out, void* residual_out, const void* x, const void* residual,
                          const void* weight, int64_t rows, int64_t hidden, int64_t x_stride,
                          int64_t r_stride, int64_t out_stride, int64_t ro_stride, float eps,
                          int rounded_sum, int dtype, int wdtype, void* stream);
int vx_act_and_mul(void* out, const void* x, const void* up, int64_t rows, int64_t d,
                   int64_t x_stride, int64_t up_stride, int act, int dtype, void* stream);
// VX_QUANT_ARGS of kernels.cuh, spelled out.
#define VX_LAUNCHER_QUANT_ARGS                                                              \
  const float *scale, const float *scale_ub, int scheme, int fnuz, float qmax,             \
      int64_t group_size, int64_t s_stride_t, int64_t s_stride_g, int ue8m0, float group_eps, \
      const vx::Variant *variant
int vx_quant(void* q, float* scales, const void* x, int64_t rows, int64_t hidden,
             int64_t x_stride, VX_LAUNCHER_QUANT_ARGS, int dtype, void* stream);
int vx_rms_norm_quant(void* q, float* scales, const void* x, const void* weight, int64_t rows,
                      int64_t hidden, int64_t x_stride, float eps, VX_LAUNCHER_QUANT_ARGS,
                      int dtype, int wdtype, void* stream);
int vx_fused_add_rms_norm_quant(void* q, void* residual_out, float* scales, const void* x,
                                const void* residual, const void* weight, int64_t rows,
                                int64_t hidden, int64_t x_stride, int64_t r_stride, float eps,
                                int rounded_sum, VX_LAUNCHER_QUANT_ARGS, int dtype, int wdtype,
                                void* stream);
int vx_act_and_mul_quant(void* q, float* scales, const void* x, const void* up, int64_t rows,
                         int64_t d, int64_t x_stride, int64_t up_stride, int act,
                         VX_LAUNCHER_QUANT_ARGS, int dtype, void* stream);
int vx_dynamic_scaled_fp8_quant(void* q, float* scale, const void* x, int64_t rows,
                                int64_t hidden, int64_t x_stride, int fnuz, float qmax,
                                const vx::Variant* variant, float* scale_out, int dtype,
                                void* stream);
}
