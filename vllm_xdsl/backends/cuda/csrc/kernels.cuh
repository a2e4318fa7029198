// Row kernels: one block per row (token). A *producer* computes the row's values in the
// activation dtype (identity, rms_norm, fused add + rms_norm, act-and-mul), and a *scheme*
// consumes them (store as is, or quantize static / per token / per group). Every op of
// OPS.md is one (producer, scheme) instantiation of row_kernel; nothing is written per
// combination.
//
// Numerics (OPS.md): everything in fp32; producer values are rounded to the activation dtype
// T before they are quantized, because the fused contract quantizes the materialized norm
// output. Rounding points that differ from the native contract:
//  - the row sums (mean of squares, absmax) are reduced in a tree, not sequentially;
//  - the activations use expf / erff / tanhf (device versions within 2 ulp of the host's) in
//    torch's formulas, then round to T as F.silu / F.gelu do.
// A quant variant or zero point (docs/OPS.md "Variants") instantiates row_kernel with VAR =
// true: the scale and epilogue of variant.cuh. VAR = false is the default numerics, unchanged.
#pragma once
#include "compat.h"
#include "numerics.h"
#include "variant.cuh"

namespace vx {

struct f16_t { uint16_t bits; };
struct bf16_t { uint16_t bits; };

VX_DEV float to_f(float v) { return v; }
VX_DEV float to_f(f16_t v) { return __half2float(__ushort_as_half(v.bits)); }
VX_DEV float to_f(bf16_t v) { return vx_bf16_to_float(v.bits); }

template <typename T> VX_DEV T from_f(float v);
template <> VX_DEV float from_f<float>(float v) { return v; }
template <> VX_DEV f16_t from_f<f16_t>(float v) { return {__half_as_ushort(__float2half_rn(v))}; }
template <> VX_DEV bf16_t from_f<bf16_t>(float v) { return {vx_float_to_bf16(v)}; }

// The value v takes once stored in dtype T (a rounding point of the contract).
template <typename T> VX_DEV float round_to(float v) { return to_f(from_f<T>(v)); }

// N consecutive elements; 16 bytes for activations, so one vector load or store. Never
// assume more than 16-byte alignment: a float32 weight beside f16 activations is a 32-byte
// pack (two loads) whose base the host only checked for 16.
template <typename T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) Pack { T v[N]; };

template <typename T, int N> VX_DEV void load(const T* p, float* out) {
  if constexpr (N == 1) {
    out[0] = to_f(p[0]);
  } else {
    const Pack<T, N> pk = *reinterpret_cast<const Pack<T, N>*>(p);
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = to_f(pk.v[k]);
  }
}

template <typename T, int N> VX_DEV void store(T* p, const float* in) {
  Pack<T, N> pk;
#pragma unroll
  for (int k = 0; k < N; ++k) pk.v[k] = from_f<T>(in[k]);
  *reinterpret_cast<Pack<T, N>*>(p) = pk;
}

// The act-and-mul producers: act(gate) * up, activation codes as ACTIVATION_CODES (library.py).
enum Producer { P_IDENTITY = 0, P_RMS_NORM = 1, P_ADD_RMS_NORM = 2, P_SILU_MUL = 3,
                P_GELU_MUL = 4, P_GELU_TANH_MUL = 5 };
// A variable, not a function: a constexpr host function cannot be called from device code.
template <int PROD> constexpr bool kIsAct = PROD >= P_SILU_MUL;

// torch's activation formulas in f32 (aten's CPU kernels compute f16/bf16 in f32 too).
template <int PROD> VX_DEV float activation(float a) {
  if constexpr (PROD == P_SILU_MUL) {
    return a / (1.0f + expf(-a));
  } else if constexpr (PROD == P_GELU_MUL) {
    return a * 0.5f * (1.0f + erff(a * 0.70710678118654752f));
  } else {
    return 0.5f * a * (1.0f + tanhf(0.79788456080286536f * (a + 0.044715f * a * a * a)));
  }
}
enum Scheme { S_NONE = 0, S_STATIC_FP8 = 1, S_STATIC_I8 = 2, S_TOKEN_FP8 = 3, S_TOKEN_I8 = 4,
              S_GROUP_FP8 = 5 };

struct Params {
  const void* x;
  const void* residual;
  const void* weight;      // null: no weight (all ones)
  const void* up;          // act-and-mul: the up operand (null: the second half of x)
  void* out;               // T (S_NONE), else int8 / fp8 codes; contiguous [rows, hidden]
  void* residual_out;      // T, contiguous; may alias residual (in place)
  float* scales;           // dynamic schemes: computed scales
  const float* scale;      // static schemes: dequantization scale [1]
  const float* scale_ub;   // per-token fp8: optional upper bound on the row absmax
  int64_t rows;
  int64_t hidden;          // output row length (act-and-mul on halves: half the input row)
  int64_t x_stride;        // input row strides, in elements
  int64_t up_stride;
  int64_t r_stride;
  int64_t out_stride;      // out row stride when out is T (in place: x_stride)
  int64_t ro_stride;       // residual_out row stride (in place: r_stride)
  int64_t var_size;
  float eps;
  int64_t group_size;
  int64_t s_stride_t;      // scales strides (tokens, groups), in elements
  int64_t s_stride_g;
  int ue8m0;
  float group_eps;
  int fnuz;                // fp8 flavour: e4m3fnuz (FMAX 224) instead of e4m3fn (448)
  float qmax;
  int vec;                 // 1: rows are 16-byte aligned, use vector loads/stores
  int rounded_sum;         // fused add: the norm reads x + residual rounded to T (residual_out)
  int has_variant;         // quant schemes: `variant` holds the numerics (row_kernel<..., true>)
  Variant variant;         // dynamic scales are then stored in variant.scale's dtype
};

template <class Op> VX_DEV float block_reduce(float v, Op op, float ident) {
  __shared__ float buf[1024 / VX_WARP];
#pragma unroll
  for (int o = VX_WARP / 2; o > 0; o >>= 1) v = op(v, VX_SHFL_XOR(v, o));
  const int lane = threadIdx.x % VX_WARP, wid = threadIdx.x / VX_WARP;
  const int nwarps = (blockDim.x + VX_WARP - 1) / VX_WARP;
  if (lane == 0) buf[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = lane < nwarps ? buf[lane] : ident;
#pragma unroll
    for (int o = VX_WARP / 2; o > 0; o >>= 1) v = op(v, VX_SHFL_XOR(v, o));
    if (lane == 0) buf[0] = v;
  }
  __syncthreads();
  v = buf[0];
  __syncthreads();  // buf may be reused by the next reduction
  return v;
}

struct Sum { VX_DEV float operator()(float a, float b) const { return a + b; } };
struct Max { VX_DEV float operator()(float a, float b) const { return vx_max_nan(a, b); } };

// Producer values for elements [i, i+N) of one row, rounded to T as the contract
// materializes them. With `final`, side outputs (residual_out) are written too.
template <typename T, typename W, int PROD> struct RowProducer {
  const Params& p;
  const T* x;
  const T* r;
  const T* u;  // act-and-mul: this row of up
  T* r_out;
  float inv_rms;

  VX_DEV RowProducer(const Params& p_, int64_t row) : p(p_), inv_rms(0.f) {
    x = static_cast<const T*>(p.x) + row * p.x_stride;
    u = !kIsAct<PROD> ? nullptr
        : p.up != nullptr ? static_cast<const T*>(p.up) + row * p.up_stride : x + p.hidden;
    r = PROD == P_ADD_RMS_NORM ? static_cast<const T*>(p.residual) + row * p.r_stride : nullptr;
    r_out = PROD == P_ADD_RMS_NORM ? static_cast<T*>(p.residual_out) + row * p.ro_stride : nullptr;
  }

  // fp32 input of the norm: x, or the sum x + residual, unrounded or (rounded_sum) rounded
  // to T as residual_out stores it.
  template <int N> VX_DEV void norm_input(int64_t i, float* s) const {
    load<T, N>(x + i, s);
    if constexpr (PROD == P_ADD_RMS_NORM) {
      float rv[N];
      load<T, N>(r + i, rv);
#pragma unroll
      for (int k = 0; k < N; ++k) s[k] = p.rounded_sum ? round_to<T>(s[k] + rv[k]) : s[k] + rv[k];
    }
  }

  // Called by every thread of the block before values().
  template <int N> VX_DEV void begin() {
    if constexpr (PROD == P_RMS_NORM || PROD == P_ADD_RMS_NORM) {
      const int64_t vs = p.var_size;
      const int64_t hv = p.vec ? (vs / N) * N : 0;
      float acc = 0.f;
      for (int64_t i = threadIdx.x * N; i < hv; i += blockDim.x * N) {
        float s[N];
        norm_input<N>(i, s);
#pragma unroll
        for (int k = 0; k < N; ++k) acc += s[k] * s[k];
      }
      for (int64_t i = hv + threadIdx.x; i < vs; i += blockDim.x) {
        float s[1];
        norm_input<1>(i, s);
        acc += s[0] * s[0];
      }
      const float var = block_reduce(acc, Sum(), 0.f) / static_cast<float>(vs);
      inv_rms = 1.0f / sqrtf(var + p.eps);  // torch.rsqrt on the host is 1/sqrt, not rsqrtf
    }
  }

  template <int N> VX_DEV void values(int64_t i, float* v, bool final) const {
    if constexpr (PROD == P_IDENTITY) {
      load<T, N>(x + i, v);
    } else if constexpr (kIsAct<PROD>) {
      float b[N];
      load<T, N>(x + i, v);
      load<T, N>(u + i, b);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float a = round_to<T>(activation<PROD>(v[k]));
        v[k] = round_to<T>(a * b[k]);
      }
    } else {
      norm_input<N>(i, v);
      if constexpr (PROD == P_ADD_RMS_NORM) {
        if (final) store<T, N>(r_out + i, v);
      }
      float w[N];
      if (p.weight != nullptr) load<W, N>(static_cast<const W*>(p.weight) + i, w);
#pragma unroll
      for (int k = 0; k < N; ++k) {
        float y = v[k] * inv_rms;
        // y.to(weight.dtype) * weight, then .to(x.dtype)
        if (p.weight != nullptr) y = round_to<W>(round_to<W>(y) * w[k]);
        v[k] = round_to<T>(y);
      }
    }
  }
};

// VAR: the variant's numerics with scale `div`, its reciprocal `mul` and the row's zero point.
template <int SCHEME, bool VAR, int N>
VX_DEV void quant_store(void* out, int64_t off, const float* v, float mul, float div, float zp,
                        const Params& p) {
  Pack<uint8_t, N> pk;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if constexpr (VAR) {
      constexpr bool kInt8 = SCHEME == S_STATIC_I8 || SCHEME == S_TOKEN_I8;
      pk.v[k] = variant_code<kInt8>(v[k], div, mul, zp, p.variant, p.qmax, p.fnuz);
    } else if constexpr (SCHEME == S_STATIC_I8 || SCHEME == S_TOKEN_I8) {
      // A zero per-token scale (all-zero row) gives q = 0, as in the contract.
      const float q = SCHEME == S_TOKEN_I8 && div == 0.f ? 0.f : v[k] / div;
      pk.v[k] = static_cast<uint8_t>(vx_float_to_int8(q));
    } else {
      float q = SCHEME == S_STATIC_FP8 ? v[k] * mul : v[k] / div;
      q = vx_min_nan(vx_max_nan(q, -p.qmax), p.qmax);
      pk.v[k] = p.fnuz ? vx_float_to_e4m3<true>(q) : vx_float_to_e4m3<false>(q);
    }
  }
  *reinterpret_cast<Pack<uint8_t, N>*>(static_cast<uint8_t*>(out) + off) = pk;
}

// Loop over the row: vector chunks of N, then a scalar tail (or scalar only when unaligned).
#define VX_ROW_LOOP(HIDDEN, ...)                                               \
  {                                                                            \
    const int64_t hv_ = p.vec ? ((HIDDEN) / N) * N : 0;                        \
    for (int64_t i = threadIdx.x * N; i < hv_; i += blockDim.x * N) {          \
      constexpr int n = N;                                                     \
      __VA_ARGS__                                                              \
    }                                                                          \
    for (int64_t i = hv_ + threadIdx.x; i < (HIDDEN); i += blockDim.x) {       \
      constexpr int n = 1;                                                     \
      __VA_ARGS__                                                              \
    }                                                                          \
  }

template <typename T, typename W, int PROD, int SCHEME, bool VAR = false>
__global__ void __launch_bounds__(1024) row_kernel(Params p) {
  VX_DYN_SMEM(float, group_scale);  // per-group absmax, then scale (S_GROUP_FP8)
  constexpr int N = 16 / sizeof(T);
  const int64_t row = blockIdx.x;
  const int64_t H = p.hidden;
  RowProducer<T, W, PROD> prod(p, row);
  prod.template begin<N>();

  float mul = 1.f, div = 1.f, zp = 0.f;
  if constexpr (VAR) {
    if (p.variant.zp != nullptr) zp = zero_point_of(p.variant, row, 0);
    if constexpr (SCHEME == S_STATIC_FP8 || SCHEME == S_STATIC_I8) {
      div = p.scale[0];
      mul = 1.0f / div;
    }
  } else {
    if constexpr (SCHEME == S_STATIC_FP8) mul = 1.0f / p.scale[0];  // x * (1 / scale)
    if constexpr (SCHEME == S_STATIC_I8) div = p.scale[0];          // x / scale
  }
  if constexpr (SCHEME == S_TOKEN_FP8 || SCHEME == S_TOKEN_I8) {
    float m = 0.f;
    VX_ROW_LOOP(H, {
      float v[n];
      prod.template values<n>(i, v, false);
      for (int k = 0; k < n; ++k) m = vx_max_nan(m, fabsf(v[k]));
    })
    m = block_reduce(m, Max(), 0.f);
    if constexpr (VAR) {
      if (p.scale_ub != nullptr) m = vx_min_nan(m, p.scale_ub[0]);
      div = variant_scale(m, p.variant, 0);
      mul = 1.0f / div;
      if (threadIdx.x == 0) store_scale(p.scales, row * p.s_stride_t, div, p.variant.scale);
    } else {
      if constexpr (SCHEME == S_TOKEN_FP8) {
        if (p.scale_ub != nullptr) m = vx_min_nan(m, p.scale_ub[0]);
        const float min_scale = 1.0f / (p.qmax * 512.0f);
        div = vx_max_nan(m / p.qmax, min_scale);
      } else {
        div = m / 127.0f;
      }
      if (threadIdx.x == 0) p.scales[row * p.s_stride_t] = div;
    }
  }
  if constexpr (SCHEME == S_GROUP_FP8) {
    const int64_t G = H / p.group_size;
    for (int64_t g = threadIdx.x; g < G; g += blockDim.x) group_scale[g] = 0.f;
    __syncthreads();
    // A chunk never straddles groups: the host enables vectors only if N divides group_size.
    VX_ROW_LOOP(H, {
      float v[n];
      prod.template values<n>(i, v, false);
      float m = 0.f;
      for (int k = 0; k < n; ++k) m = vx_max_nan(m, fabsf(v[k]));
      // Non-negative floats (and NaN, above inf) order like their bit patterns as ints.
      atomicMax(reinterpret_cast<int*>(&group_scale[i / p.group_size]), __float_as_int(m));
    })
    __syncthreads();
    for (int64_t g = threadIdx.x; g < G; g += blockDim.x) {
      const int64_t at = row * p.s_stride_t + g * p.s_stride_g;
      if constexpr (VAR) {
        const float s = variant_scale(group_scale[g], p.variant, p.ue8m0);
        group_scale[g] = s;
        store_scale(p.scales, at, s, p.variant.scale);
      } else {
        float s = vx_max_nan(group_scale[g], p.group_eps) / p.qmax;
        // Same formula as the contract (not an exact bit trick), so both round alike.
        if (p.ue8m0) s = exp2f(ceilf(log2f(s)));
        group_scale[g] = s;
        p.scales[at] = s;
      }
    }
    __syncthreads();
  }

  VX_ROW_LOOP(H, {
    float v[n];
    prod.template values<n>(i, v, true);
    if constexpr (SCHEME == S_NONE) {
      store<T, n>(static_cast<T*>(p.out) + row * p.out_stride + i, v);
    } else {
      if constexpr (SCHEME == S_GROUP_FP8) {
        div = group_scale[i / p.group_size];
        if constexpr (VAR) {
          mul = 1.0f / div;
          if (p.variant.zp_group_stride) zp = zero_point_of(p.variant, row, i / p.group_size);
        }
      }
      quant_store<SCHEME, VAR, n>(p.out, row * H + i, v, mul, div, zp, p);
    }
  })
}

// Dynamic per-tensor fp8: the global absmax (atomicMax on the bits of a non-negative float)...
template <typename T> __global__ void __launch_bounds__(1024) absmax_kernel(Params p, float* amax) {
  constexpr int N = 16 / sizeof(T);
  const T* x = static_cast<const T*>(p.x) + blockIdx.x * p.x_stride;
  float m = 0.f;
  VX_ROW_LOOP(p.hidden, {
    float v[n];
    load<T, n>(x + i, v);
    for (int k = 0; k < n; ++k) m = vx_max_nan(m, fabsf(v[k]));
  })
  m = block_reduce(m, Max(), 0.f);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
}

// ...then the scale max(absmax / FMAX, 1 / (FMAX * 512)), in place.
__global__ void finish_tensor_scale(float* scale, float qmax) {
  scale[0] = vx_max_nan(scale[0] / qmax, 1.0f / (qmax * 512.0f));
}

// The launch parameters of a quant (its epilogue), host side: shared by the GPU launchers
// and the host build (backends/cpu).
inline Params quant_params(void* q, float* scales, const float* scale, const float* scale_ub,
                           int fnuz, int64_t group_size, int64_t s_stride_t, int64_t s_stride_g,
                           int ue8m0, float group_eps, float qmax, const Variant* variant) {
  Params p = {};
  if (variant != nullptr) {
    p.has_variant = 1;
    p.variant = *variant;
  }
  p.out = q;
  p.scales = scales;
  p.scale = scale;
  p.scale_ub = scale_ub;
  p.fnuz = fnuz;
  p.group_size = group_size;
  p.s_stride_t = s_stride_t;
  p.s_stride_g = s_stride_g;
  p.ue8m0 = ue8m0;
  p.group_eps = group_eps;
  p.qmax = qmax;
  return p;
}

}  // namespace vx

// The quant arguments of an extern "C" launcher, and its Params from them (both builds).
#define VX_QUANT_ARGS                                                                      \
  const float *scale, const float *scale_ub, int scheme, int fnuz, float qmax,             \
      int64_t group_size, int64_t s_stride_t, int64_t s_stride_g, int ue8m0, float group_eps, \
      const Variant *variant
#define VX_QUANT_PARAMS(q, scales)                                                          \
  quant_params(q, scales, scale, scale_ub, fnuz, group_size, s_stride_t, s_stride_g, ue8m0, \
               group_eps, qmax, variant)
