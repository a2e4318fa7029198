// The quant variants of docs/OPS.md ("Variants"), step for step as
// natives_variant.quantize_variant computes them. row_kernel<..., VAR = true> (kernels.cuh)
// calls these instead of its default epilogue, so the default numerics compile to the same
// code as before variants existed; the host parses a variant once (variant.py) into this
// plain data and passes it by pointer (null: the default numerics).
#pragma once
#include "compat.h"
#include "numerics.h"

namespace vx {

// Dtype of a rounding point (the activation dtype codes of vx_kernels.cu), and of a zero
// point (those, then int8 and uint8; the host converts any other dtype to f32 exactly).
enum RoundCode { R_F32 = 0, R_F16 = 1, R_BF16 = 2 };
enum ZeroPointCode { Z_F32 = 0, Z_F16 = 1, Z_BF16 = 2, Z_I8 = 3, Z_U8 = 4 };
// The floor of a dynamic scale, resolved on the host from the variant and the scheme.
enum Floor { F_NONE = 0, F_MIN_SCALE = 1, F_ZERO_EPS = 2, F_GROUP_EPS = 3 };

// Field for field the ctypes.Structure VxVariant of variant.py.
struct Variant {
  int recip;           // y = x * (1 / s), else x / s
  int quotient;        // RoundCode of the quotient and of the zero-point sum
  int scale;           // RoundCode of dynamic scales (computed in f32, stored in that dtype)
  int floor;           // Floor
  float floor_value;   // min_scale: 1 / (FMAX * 512); zero_eps: eps in the scale dtype;
                       // group: the absmax floor group_eps
  float range;         // dynamic s = absmax / range
  int zero_rows;       // dynamic int8 with the default floor: a zero scale gives q = 0
  int zp_dtype;        // ZeroPointCode
  const void* zp;      // null: no zero point
  int64_t zp_stride;   // per row: 0 (one zero point), 1 (one per row) or G (one per group)
  int64_t zp_group_stride;  // per group: 1 (one per group), else 0
};

// r_d(v) of the contract: v rounded to dtype `code` and back.
VX_DEV float round_code(float v, int code) {
  if (code == R_BF16) return vx_bf16_to_float(vx_float_to_bf16(v));
  if (code == R_F16) return __half2float(__float2half_rn(v));
  return v;
}

// The dynamic scale of an absmax `a` (already bounded by scale_ub): natives_variant.dynamic_scale.
VX_DEV float variant_scale(float a, const Variant& v, int ue8m0) {
  if (v.floor == F_GROUP_EPS) a = vx_max_nan(a, v.floor_value);
  float s = round_code(a / v.range, v.scale);
  if (ue8m0) s = exp2f(ceilf(log2f(s)));
  if (v.floor == F_MIN_SCALE) {
    s = vx_max_nan(s, v.floor_value);
  } else if (v.floor == F_ZERO_EPS) {
    s = s == 0.f ? v.floor_value : s;
  }
  return round_code(s, v.scale);  // the returned scale is the one used
}

// Store scale `s` (a value of the scale dtype) at `scales[i]` in that dtype.
VX_DEV void store_scale(float* scales, int64_t i, float s, int code) {
  if (code == R_F32) {
    scales[i] = s;
  } else {
    uint16_t* s16 = reinterpret_cast<uint16_t*>(scales);
    s16[i] = code == R_BF16 ? vx_float_to_bf16(s) : __half_as_ushort(__float2half_rn(s));
  }
}

// The zero point of group g of `row` as zero_point.to(quotient dtype).float() holds it.
VX_DEV float zero_point_of(const Variant& v, int64_t row, int64_t g) {
  const int64_t i = row * v.zp_stride + g * v.zp_group_stride;
  float z;
  switch (v.zp_dtype) {
    case Z_F16: z = __half2float(__ushort_as_half(static_cast<const uint16_t*>(v.zp)[i])); break;
    case Z_BF16: z = vx_bf16_to_float(static_cast<const uint16_t*>(v.zp)[i]); break;
    case Z_I8: z = static_cast<float>(static_cast<const int8_t*>(v.zp)[i]); break;
    case Z_U8: z = static_cast<float>(static_cast<const uint8_t*>(v.zp)[i]); break;
    default: z = static_cast<const float*>(v.zp)[i]; break;
  }
  return round_code(z, v.quotient);
}

// The code of x quantized with scale s (inv = 1 / s) and the row's zero point zp.
template <bool INT8>
VX_DEV uint8_t variant_code(float x, float s, float inv, float zp, const Variant& v, float qmax,
                            int fnuz) {
  float y = v.recip ? x * inv : x / s;
  if (v.zero_rows && s == 0.f) y = 0.f;
  y = round_code(y, v.quotient);
  if (v.zp != nullptr) y = round_code(y + zp, v.quotient);
  if constexpr (INT8) {
    return static_cast<uint8_t>(vx_float_to_int8(y));  // round half to even, then clamp
  } else {
    y = vx_min_nan(vx_max_nan(y, -qmax), qmax);
    return fnuz ? vx_float_to_e4m3<true>(y) : vx_float_to_e4m3<false>(y);
  }
}

// Dynamic per-tensor: the variant's scale of the global absmax in `scale` (f32, read by the
// quant launch), and the returned scale in the scale dtype at `scale_out`.
__global__ void finish_tensor_scale_variant(float* scale, float* scale_out, Variant v) {
  const float s = variant_scale(scale[0], v, 0);
  scale[0] = s;
  store_scale(scale_out, 0, s, v.scale);
}

}  // namespace vx
