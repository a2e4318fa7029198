// Host-callable launchers (extern "C", loaded with ctypes). Every launcher takes raw device
// pointers, sizes and row strides in elements, dtype codes and a stream, and returns 0 or an
// error code; vx_last_error() then says what went wrong, in one line.
#include <stdio.h>

#include <type_traits>

#include "kernels.cuh"

using namespace vx;

#ifndef VX_MAX_THREADS
#define VX_MAX_THREADS 1024
#endif

enum DType { D_F32 = 0, D_F16 = 1, D_BF16 = 2 };

// Threads per block: one per vector chunk of the row, a multiple of the warp, at most 1024.
static int block_threads(int64_t items) {
  const int64_t capped = items < VX_MAX_THREADS ? (items < 1 ? 1 : items) : VX_MAX_THREADS;
  return static_cast<int>((capped + VX_WARP - 1) / VX_WARP * VX_WARP);
}

static thread_local char g_error[512] = "";

static int fail(const char* fmt, const char* a = "", long long b = 0) {
  snprintf(g_error, sizeof(g_error), fmt, a, b);
  return 1;
}

static int check_device() {
  int n = 0;
  const vxError_t e = vxGetDeviceCount(&n);
  if (e != vxSuccess) return fail("no usable " VX_RUNTIME " device: %s", vxGetErrorString(e));
  if (n == 0) return fail("no " VX_RUNTIME " device present%s", "");
  return 0;
}

static bool aligned(const void* ptr) { return ptr == nullptr || (reinterpret_cast<uintptr_t>(ptr) % 16) == 0; }

static int elem_size(int dtype) { return dtype == D_F32 ? 4 : 2; }

// Vector loads only if every row of every array starts on a 16-byte boundary.
static int can_vectorize(const Params& p, int dtype, int scheme, int prod) {
  const int64_t es = elem_size(dtype), n = 16 / es;
  bool ok = aligned(p.x) && aligned(p.residual) && aligned(p.weight) && aligned(p.out) &&
            aligned(p.residual_out) && aligned(p.up) && p.hidden % n == 0 &&
            (p.x_stride * es) % 16 == 0;
  if (p.up != nullptr) ok = ok && (p.up_stride * es) % 16 == 0;
  if (prod == P_ADD_RMS_NORM) ok = ok && (p.r_stride * es) % 16 == 0 && (p.ro_stride * es) % 16 == 0;
  if (scheme == S_NONE) ok = ok && (p.out_stride * es) % 16 == 0;
  if (scheme == S_GROUP_FP8) ok = ok && p.group_size % n == 0;
  return ok ? 1 : 0;
}

template <typename T, typename W, int PROD, int SCHEME, bool VAR>
static int launch(Params p, vxStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  if (p.rows == 0) return 0;
  const int threads = block_threads(p.vec ? p.hidden / N : p.hidden);
  size_t smem = 0;
  if (SCHEME == S_GROUP_FP8) {
    smem = static_cast<size_t>(p.hidden / p.group_size) * sizeof(float);
    if (smem > 48 * 1024) return fail("too many groups per row (%s%lld)", "", p.hidden / p.group_size);
  }
  auto* kernel = &row_kernel<T, W, PROD, SCHEME, VAR>;
  VX_LAUNCH(kernel, dim3(static_cast<unsigned>(p.rows)), dim3(threads), smem, stream, p);
  const vxError_t e = vxGetLastError();
  return e == vxSuccess ? 0 : fail("kernel launch failed: %s", vxGetErrorString(e));
}

template <typename T, int PROD, int SCHEME, bool VAR>
static int launch_w(Params p, int wdtype, int dtype, vxStream_t stream) {
  if (p.weight == nullptr || wdtype == dtype) return launch<T, T, PROD, SCHEME, VAR>(p, stream);
  if constexpr ((PROD == P_RMS_NORM || PROD == P_ADD_RMS_NORM) && !std::is_same<T, float>::value) {
    // Gemma-style float32 weight on f16/bf16 x, unfused or followed by any quant.
    if (wdtype == D_F32) return launch<T, float, PROD, SCHEME, VAR>(p, stream);
  }
  return fail("unsupported weight dtype code %s%lld for this activation dtype", "", wdtype);
}

template <int PROD, int SCHEME, bool VAR = false>
static int launch_dtype(Params p, int dtype, int wdtype, vxStream_t stream) {
  p.vec = can_vectorize(p, dtype, SCHEME, PROD);
  switch (dtype) {
    case D_F32: return launch_w<float, PROD, SCHEME, VAR>(p, wdtype, dtype, stream);
    case D_F16: return launch_w<f16_t, PROD, SCHEME, VAR>(p, wdtype, dtype, stream);
    case D_BF16: return launch_w<bf16_t, PROD, SCHEME, VAR>(p, wdtype, dtype, stream);
    default: return fail("unsupported activation dtype code %s%lld", "", dtype);
  }
}

// A quant scheme: the default numerics, or (has_variant) the variant's epilogue.
template <int PROD, int SCHEME>
static int launch_quant(Params p, int dtype, int wdtype, vxStream_t stream) {
  if (p.has_variant) return launch_dtype<PROD, SCHEME, true>(p, dtype, wdtype, stream);
  return launch_dtype<PROD, SCHEME, false>(p, dtype, wdtype, stream);
}

template <int PROD>
static int launch_scheme(Params p, int scheme, int dtype, int wdtype, vxStream_t stream) {
  if (check_device()) return 1;
  switch (scheme) {
    case S_NONE: return launch_dtype<PROD, S_NONE>(p, dtype, wdtype, stream);
    case S_STATIC_FP8: return launch_quant<PROD, S_STATIC_FP8>(p, dtype, wdtype, stream);
    case S_STATIC_I8: return launch_quant<PROD, S_STATIC_I8>(p, dtype, wdtype, stream);
    case S_TOKEN_FP8: return launch_quant<PROD, S_TOKEN_FP8>(p, dtype, wdtype, stream);
    case S_TOKEN_I8: return launch_quant<PROD, S_TOKEN_I8>(p, dtype, wdtype, stream);
    case S_GROUP_FP8:
      if (p.group_size <= 0 || p.hidden % p.group_size != 0)
        return fail("group_size %s%lld must divide the hidden size", "", p.group_size);
      return launch_quant<PROD, S_GROUP_FP8>(p, dtype, wdtype, stream);
    default: return fail("unknown quant scheme code %s%lld", "", scheme);
  }
}

static int launch_act(Params p, int act, int scheme, int dtype, vxStream_t stream) {
  switch (act) {
    case P_SILU_MUL: return launch_scheme<P_SILU_MUL>(p, scheme, dtype, dtype, stream);
    case P_GELU_MUL: return launch_scheme<P_GELU_MUL>(p, scheme, dtype, dtype, stream);
    case P_GELU_TANH_MUL: return launch_scheme<P_GELU_TANH_MUL>(p, scheme, dtype, dtype, stream);
    default: return fail("unknown activation code %s%lld", "", act);
  }
}

extern "C" {

const char* vx_last_error(void) { return g_error; }

// 0 when a device is usable; otherwise 1 and vx_last_error() says why.
int vx_check_device(void) { return check_device(); }

// Make `device` current for this thread's launches (the stream passed must belong to it).
int vx_use_device(int device) {
  if (check_device()) return 1;
  const vxError_t e = vxSetDevice(device);
  return e == vxSuccess ? 0 : fail("cannot select device: %s", vxGetErrorString(e));
}

int vx_rms_norm(void* out, const void* x, const void* weight, int64_t rows, int64_t hidden,
                int64_t x_stride, int64_t var_size, float eps, int dtype, int wdtype, void* stream) {
  Params p = {};
  p.x = x; p.weight = weight; p.out = out;
  p.rows = rows; p.hidden = hidden; p.x_stride = x_stride; p.out_stride = hidden;
  p.var_size = var_size; p.eps = eps;
  return launch_scheme<P_RMS_NORM>(p, S_NONE, dtype, wdtype, static_cast<vxStream_t>(stream));
}

// In place when out == x and residual_out == residual (strides as given). rounded_sum: the
// norm reads the sum rounded to the activation dtype (the OPS.md variant).
int vx_fused_add_rms_norm(void* out, void* residual_out, const void* x, const void* residual,
                          const void* weight, int64_t rows, int64_t hidden, int64_t x_stride,
                          int64_t r_stride, int64_t out_stride, int64_t ro_stride, float eps,
                          int rounded_sum, int dtype, int wdtype, void* stream) {
  Params p = {};
  p.x = x; p.residual = residual; p.weight = weight; p.out = out; p.residual_out = residual_out;
  p.rows = rows; p.hidden = hidden; p.x_stride = x_stride; p.r_stride = r_stride;
  p.out_stride = out_stride; p.ro_stride = ro_stride; p.var_size = hidden; p.eps = eps;
  p.rounded_sum = rounded_sum;
  return launch_scheme<P_ADD_RMS_NORM>(p, S_NONE, dtype, wdtype, static_cast<vxStream_t>(stream));
}

// act(gate) * up for producer code `act` (P_SILU_MUL, P_GELU_MUL, P_GELU_TANH_MUL): gate and
// up are the halves of x's rows (up null) or rows of x and up, of d elements each.
int vx_act_and_mul(void* out, const void* x, const void* up, int64_t rows, int64_t d,
                   int64_t x_stride, int64_t up_stride, int act, int dtype, void* stream) {
  Params p = {};
  p.x = x; p.up = up; p.out = out; p.rows = rows; p.hidden = d; p.x_stride = x_stride;
  p.up_stride = up_stride; p.out_stride = d;
  return launch_act(p, act, S_NONE, dtype, static_cast<vxStream_t>(stream));
}

// Static / per-token / per-group quant of x (scheme codes as in kernels.cuh).
int vx_quant(void* q, float* scales, const void* x, int64_t rows, int64_t hidden, int64_t x_stride,
             VX_QUANT_ARGS, int dtype, void* stream) {
  Params p = VX_QUANT_PARAMS(q, scales);
  p.x = x; p.rows = rows; p.hidden = hidden; p.x_stride = x_stride;
  return launch_scheme<P_IDENTITY>(p, scheme, dtype, dtype, static_cast<vxStream_t>(stream));
}

int vx_rms_norm_quant(void* q, float* scales, const void* x, const void* weight, int64_t rows,
                      int64_t hidden, int64_t x_stride, float eps, VX_QUANT_ARGS, int dtype,
                      int wdtype, void* stream) {
  Params p = VX_QUANT_PARAMS(q, scales);
  p.x = x; p.weight = weight; p.rows = rows; p.hidden = hidden; p.x_stride = x_stride;
  p.var_size = hidden; p.eps = eps;
  return launch_scheme<P_RMS_NORM>(p, scheme, dtype, wdtype, static_cast<vxStream_t>(stream));
}

int vx_fused_add_rms_norm_quant(void* q, void* residual_out, float* scales, const void* x,
                                const void* residual, const void* weight, int64_t rows,
                                int64_t hidden, int64_t x_stride, int64_t r_stride, float eps,
                                int rounded_sum, VX_QUANT_ARGS, int dtype, int wdtype,
                                void* stream) {
  Params p = VX_QUANT_PARAMS(q, scales);
  p.x = x; p.residual = residual; p.weight = weight; p.residual_out = residual_out;
  p.rows = rows; p.hidden = hidden; p.x_stride = x_stride; p.r_stride = r_stride;
  p.ro_stride = hidden; p.var_size = hidden; p.eps = eps; p.rounded_sum = rounded_sum;
  return launch_scheme<P_ADD_RMS_NORM>(p, scheme, dtype, wdtype, static_cast<vxStream_t>(stream));
}

int vx_act_and_mul_quant(void* q, float* scales, const void* x, const void* up, int64_t rows,
                         int64_t d, int64_t x_stride, int64_t up_stride, int act, VX_QUANT_ARGS,
                         int dtype, void* stream) {
  Params p = VX_QUANT_PARAMS(q, scales);
  p.x = x; p.up = up; p.rows = rows; p.hidden = d; p.x_stride = x_stride; p.up_stride = up_stride;
  return launch_act(p, act, scheme, dtype, static_cast<vxStream_t>(stream));
}

// Dynamic per-tensor fp8: absmax over all rows into `scale`, the scale formula, then static quant.
// With a variant (null: the default numerics), its scale formula and epilogue; the scale is
// also stored in the variant's scale dtype at `scale_out`.
int vx_dynamic_scaled_fp8_quant(void* q, float* scale, const void* x, int64_t rows, int64_t hidden,
                                int64_t x_stride, int fnuz, float qmax, const Variant* variant,
                                float* scale_out, int dtype, void* stream) {
  if (check_device()) return 1;
  const vxStream_t s = static_cast<vxStream_t>(stream);
  vxError_t e = vxMemsetAsync(scale, 0, sizeof(float), s);
  if (e != vxSuccess) return fail("memset failed: %s", vxGetErrorString(e));
  Params p = quant_params(q, nullptr, scale, nullptr, fnuz, 0, 0, 0, 0, 0.f, qmax, variant);
  p.x = x; p.rows = rows; p.hidden = hidden; p.x_stride = x_stride;
  p.vec = can_vectorize(p, dtype, S_STATIC_FP8, P_IDENTITY);
  const int threads = block_threads(p.vec ? hidden / (16 / elem_size(dtype)) : hidden);
  if (rows > 0) {
    const dim3 grid(static_cast<unsigned>(rows));
    switch (dtype) {
      case D_F32: { auto* k = &absmax_kernel<float>; VX_LAUNCH(k, grid, threads, 0, s, p, scale); break; }
      case D_F16: { auto* k = &absmax_kernel<f16_t>; VX_LAUNCH(k, grid, threads, 0, s, p, scale); break; }
      case D_BF16: { auto* k = &absmax_kernel<bf16_t>; VX_LAUNCH(k, grid, threads, 0, s, p, scale); break; }
      default: return fail("unsupported activation dtype code %s%lld", "", dtype);
    }
  }
  if (variant != nullptr) {
    auto* finish = &finish_tensor_scale_variant;
    VX_LAUNCH(finish, 1, 1, 0, s, scale, scale_out, *variant);
  } else {
    auto* finish = &finish_tensor_scale;
    VX_LAUNCH(finish, 1, 1, 0, s, scale, qmax);
  }
  e = vxGetLastError();
  if (e != vxSuccess) return fail("kernel launch failed: %s", vxGetErrorString(e));
  return launch_scheme<P_IDENTITY>(p, S_STATIC_FP8, dtype, dtype, s);
}

}  // extern "C"
