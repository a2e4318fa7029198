// The CUDA backend's kernel library (backends/cuda/csrc), built for the host CPU: the same
// extern "C" launchers, Params, producers, schemes, variant epilogue and scalar numerics
// (kernels.cuh, variant.cuh, numerics.h), with the row kernel written for AVX-512 instead of
// a GPU block: one row per OpenMP iteration (torch's own thread pool: torch bundles the
// libgomp this links against, so torch.set_num_threads governs it), 16 lanes of f32 per
// step, masked loads and stores for the row tails.
//
// Numerics: as kernels.cuh. Every value is rounded exactly where the contract rounds (bf16
// and f16 round to nearest even, fp8 e4m3fn / e4m3fnuz rounds to nearest even after the
// clamp, int8 rounds half to even and saturates, NaN kept as torch keeps it); the row sums
// (squares, absmax) are reduced in 16 lanes, not in torch's order. A quant variant (VAR)
// takes variant.cuh's scalar epilogue per element; the default numerics are vectorized.
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__)
#error "the cpu kernels need AVX-512 (F, BW, VL): build with -march=native on such a CPU"
#endif
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels.cuh"  // built with -DVX_EMUL: the host definitions of the device names
#include "vx_launchers.h"  // the declarations the definitions below must match

using namespace vx;

namespace {

enum DType { D_F32 = 0, D_F16 = 1, D_BF16 = 2 };
constexpr int L = 16;  // f32 lanes of a vector

thread_local char g_error[512] = "";

int fail(const char* fmt, const char* a = "", long long b = 0) {
  snprintf(g_error, sizeof(g_error), fmt, a, b);
  return 1;
}

__mmask16 lanes(int64_t n) { return n >= L ? 0xffff : static_cast<__mmask16>((1u << n) - 1u); }

// --- loads, stores and roundings of 16 values ---------------------------------------------

template <typename T> __m512 vload(const T* p, __mmask16 m);
template <> __m512 vload<float>(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
template <> __m512 vload<f16_t>(const f16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
template <> __m512 vload<bf16_t>(const bf16_t* p, __mmask16 m) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// f32 -> bf16 bits (in the high half of each lane), round to nearest even, NaN made quiet:
// vx_float_to_bf16 of numerics.h, lane by lane.
__m512i bf16_bits(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x400000));
  return _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
}

constexpr int kToNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// 16 bf16 codes of v, rounded to nearest even. AVX512-BF16's conversion does that in one
// instruction but flushes denormal inputs to zero: lanes with a denormal (rare) take the
// integer rounding instead, so the result is vx_float_to_bf16's in every lane.
__m256i bf16_codes(__m512 v) {
#ifdef __AVX512BF16__
  __m256i r = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 denormal = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000)) &
                             _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x007fffff));
  if (__builtin_expect(denormal != 0, 0))
    r = _mm256_mask_mov_epi16(r, denormal,
                              _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_bits(v), 16)));
  return r;
#else
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_bits(v), 16));
#endif
}

__m512 bf16_widen(__m256i codes) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(codes), 16));
}

// The value v takes once stored in dtype T (a rounding point of the contract).
template <typename T> __m512 vround(__m512 v) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    return bf16_widen(bf16_codes(v));
  } else if constexpr (std::is_same_v<T, f16_t>) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, kToNearest));
  } else {
    return v;
  }
}

template <typename T> void vstore(T* p, __m512 v, __mmask16 m) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    _mm256_mask_storeu_epi16(p, m, bf16_codes(v));
  } else if constexpr (std::is_same_v<T, f16_t>) {
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, kToNearest));
  } else {
    _mm512_mask_storeu_ps(p, m, v);
  }
}

// Store v, already a value of T (vround<T>): bf16 keeps the high halves, no rounding left.
template <typename T> void vstore_exact(T* p, __m512 v, __mmask16 m) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    _mm256_mask_storeu_epi16(
        p, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)));
  } else {
    vstore<T>(p, v, m);
  }
}

__m512 vabs(__m512 v) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
}

// clamp(v, -qmax, qmax) keeping NaN (vx_min_nan(vx_max_nan(v, -qmax), qmax)): max_ps and
// min_ps return their second operand when one is NaN.
__m512 vclamp(__m512 v, float qmax) {
  return _mm512_min_ps(_mm512_set1_ps(qmax), _mm512_max_ps(_mm512_set1_ps(-qmax), v));
}

// vx_float_to_e4m3<FNUZ> of a clamped value (|v| <= FMAX or NaN), lane by lane.
template <bool FNUZ> __m128i e4m3_codes(__m512 v) {
  constexpr int bias = FNUZ ? 8 : 7;
  const __m512i u = _mm512_castps_si512(v);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80));
  const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  // Below the smallest normal: a multiple of the subnormal step, rounded half to even by
  // the conversion (default rounding mode), as rintf does in numerics.h.
  const __m512i sub = _mm512_cvtps_epi32(
      _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(static_cast<float>(1 << (bias + 2)))));
  const __m512i r = _mm512_add_epi32(
      a, _mm512_add_epi32(_mm512_set1_epi32(0x7ffff),
                          _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1))));
  const __m512i e = _mm512_sub_epi32(_mm512_srli_epi32(r, 23), _mm512_set1_epi32(127 - bias));
  __m512i norm = _mm512_or_si512(_mm512_slli_epi32(e, 3),
                                 _mm512_and_si512(_mm512_srli_epi32(r, 20), _mm512_set1_epi32(7)));
  const int max_code = FNUZ ? 0x7f : 0x7e;
  norm = _mm512_mask_mov_epi32(norm, _mm512_cmpgt_epu32_mask(e, _mm512_set1_epi32(15)),
                               _mm512_set1_epi32(max_code + 1));
  norm = _mm512_min_epu32(norm, _mm512_set1_epi32(max_code));
  const __mmask16 is_sub = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32((127 + 1 - bias) << 23));
  __m512i code = _mm512_mask_mov_epi32(norm, is_sub, sub);
  code = _mm512_or_si512(code, sign);
  if constexpr (FNUZ) {  // no negative zero; NaN is 0x80
    code = _mm512_mask_mov_epi32(code, _mm512_cmpeq_epi32_mask(_mm512_and_si512(
        code, _mm512_set1_epi32(0x7f)), _mm512_setzero_si512()), _mm512_setzero_si512());
  }
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
  code = _mm512_mask_mov_epi32(code, nan, FNUZ ? _mm512_set1_epi32(0x80)
                                               : _mm512_or_si512(sign, _mm512_set1_epi32(0x7f)));
  return _mm512_cvtepi32_epi8(code);
}

// vx_float_to_int8: NaN gives 0; round half to even; saturate to [-128, 127] (clamping
// first is the same, the bounds being integers, and keeps the conversion in range).
__m128i int8_codes(__m512 v) {
  v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-128.f)), _mm512_set1_ps(127.f));
  return _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v));
}

// e^v to about 1 ulp: 2^n * e^r with |r| <= ln2 / 2; scalef gives inf / 0 past the range.
__m512 vexp(__m512 v) {
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-104.f)), _mm512_set1_ps(89.f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)),
                                        kToNearest);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), v);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);
}

// Activations in f32 (kernels.cuh's formulas). SiLU is vectorized; GELU's erf and tanh are
// the C library's, lane by lane (accurate, as the GPU kernels use erff / tanhf).
template <int PROD> __m512 vactivation(__m512 a) {
  if constexpr (PROD == P_SILU_MUL) {
    const __m512 e = vexp(_mm512_sub_ps(_mm512_setzero_ps(), a));
    return _mm512_div_ps(a, _mm512_add_ps(_mm512_set1_ps(1.f), e));
  } else {
    alignas(64) float t[L];
    _mm512_store_ps(t, a);
    for (int k = 0; k < L; ++k) t[k] = activation<PROD>(t[k]);
    return _mm512_load_ps(t);
  }
}

// RN(x / s), the division the contract writes, without a division (one vdivps is several
// times the cost of the rest of a quant step): with inv = RN(1 / s), y = RN(x * inv) is
// within an ulp of x / s, r = x - y * s is exact (one fma), and RN(y + r * inv) is the
// correctly rounded quotient (Markstein's theorem). It needs s and 1 / s normal (the caller
// checks: quotient_exact) and a finite y; where y is inf, NaN or zero, y is x / s already
// (the fma would lose a zero's sign; a quotient that underflows quantizes to 0 either way).
__m512 vquot(__m512 x, __m512 s, __m512 inv) {
  const __m512 y = _mm512_mul_ps(x, inv);
  const __m512 r = _mm512_fnmadd_ps(y, s, x);
  const __m512 q = _mm512_fmadd_ps(r, inv, y);
  const __mmask16 special = _mm512_fpclass_ps_mask(y, 0x9f);  // NaN, inf or a signed zero
  return _mm512_mask_mov_ps(q, special, y);
}

bool quotient_exact(float s) {
  const float a = fabsf(s);
  return a > 1.2e-38f && a < 8.0e37f;  // s and 1 / s both normal
}

float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

// absmax of buf[b, e) keeping NaN (vx_max_nan over the values).
float absmax(const float* buf, int64_t b, int64_t e) {
  __m512 m = _mm512_setzero_ps();
  __mmask16 nan = 0;
  for (int64_t i = b; i < e; i += L) {
    const __m512 a = vabs(_mm512_maskz_loadu_ps(lanes(e - i), buf + i));
    nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    m = _mm512_max_ps(m, a);
  }
  return nan ? NAN : _mm512_reduce_max_ps(m);
}

// --- one row ------------------------------------------------------------------------------

template <typename W> __m512 apply_weight(__m512 y, const void* weight, int64_t i, __mmask16 m) {
  // y.to(weight.dtype) * weight, rounded to the weight's dtype
  const __m512 w = vload<W>(static_cast<const W*>(weight) + i, m);
  return vround<W>(_mm512_mul_ps(vround<W>(y), w));
}

// The producer's values of `row`, rounded to T as the contract materializes them, into buf
// (or, with SCHEME == S_NONE, straight into out). Writes residual_out for the fused add.
template <typename T, typename W, int PROD, int SCHEME>
void produce(const Params& p, int64_t row, float* buf) {
  const int64_t H = p.hidden;
  const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
  T* out = SCHEME == S_NONE ? static_cast<T*>(p.out) + row * p.out_stride : nullptr;
  if constexpr (PROD == P_IDENTITY) {
    for (int64_t i = 0; i < H; i += L) {
      const __mmask16 m = lanes(H - i);
      _mm512_mask_storeu_ps(buf + i, m, vload<T>(x + i, m));
    }
  } else if constexpr (kIsAct<PROD>) {
    const T* u = p.up != nullptr ? static_cast<const T*>(p.up) + row * p.up_stride : x + H;
    for (int64_t i = 0; i < H; i += L) {
      const __mmask16 m = lanes(H - i);
      const __m512 a = vround<T>(vactivation<PROD>(vload<T>(x + i, m)));
      const __m512 y = vround<T>(_mm512_mul_ps(a, vload<T>(u + i, m)));
      if constexpr (SCHEME == S_NONE) vstore_exact<T>(out + i, y, m);
      else _mm512_mask_storeu_ps(buf + i, m, y);
    }
  } else {
    const T* r = PROD == P_ADD_RMS_NORM ? static_cast<const T*>(p.residual) + row * p.r_stride
                                        : nullptr;
    T* r_out = PROD == P_ADD_RMS_NORM ? static_cast<T*>(p.residual_out) + row * p.ro_stride
                                      : nullptr;
    // The norm's f32 input (x, or x + residual, rounded to T with rounded_sum) into buf:
    // read before anything is written, so out / residual_out may alias x / residual.
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    const int64_t vs = p.var_size;
    auto input = [&](int64_t i, __mmask16 m) {
      __m512 s = vload<T>(x + i, m);
      if constexpr (PROD == P_ADD_RMS_NORM) {
        s = _mm512_add_ps(s, vload<T>(r + i, m));
        const __m512 rounded = vround<T>(s);
        vstore_exact<T>(r_out + i, rounded, m);
        if (p.rounded_sum) s = rounded;
      }
      _mm512_mask_storeu_ps(buf + i, m, s);
      return s;
    };
    int64_t i = 0;
    for (; i + 2 * L <= vs; i += 2 * L) {  // two accumulators: two adds in flight
      const __m512 s0 = input(i, 0xffff), s1 = input(i + L, 0xffff);
      acc0 = _mm512_fmadd_ps(s0, s0, acc0);
      acc1 = _mm512_fmadd_ps(s1, s1, acc1);
    }
    for (; i < vs; i += L) {
      const __mmask16 m = lanes(vs - i);
      const __m512 s = input(i, m);
      acc0 = _mm512_add_ps(acc0, _mm512_maskz_mul_ps(m, s, s));
    }
    for (i = vs; i < H; i += L) input(i, lanes(H - i));  // past variance_size
    const float var = hsum(_mm512_add_ps(acc0, acc1)) / static_cast<float>(vs);
    const __m512 inv = _mm512_set1_ps(1.0f / sqrtf(var + p.eps));  // torch.rsqrt: 1 / sqrt
    for (i = 0; i < H; i += L) {
      const __mmask16 m = lanes(H - i);
      __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, buf + i), inv);
      if (p.weight != nullptr) {
        y = apply_weight<W>(y, p.weight, i, m);
        if constexpr (!std::is_same_v<W, T>) y = vround<T>(y);  // else already a T value
      } else {
        y = vround<T>(y);
      }
      if constexpr (SCHEME == S_NONE) vstore_exact<T>(out + i, y, m);
      else _mm512_mask_storeu_ps(buf + i, m, y);
    }
  }
}

// Quantize buf[b, e) into q with the default numerics: y * mul (static fp8) or y / div.
template <int SCHEME> void quant_span(const Params& p, const float* buf, uint8_t* q, int64_t b,
                                      int64_t e, float mul, float div) {
  constexpr bool kInt8 = SCHEME == S_STATIC_I8 || SCHEME == S_TOKEN_I8;
  const __m512 vm = _mm512_set1_ps(mul), vd = _mm512_set1_ps(div);
  if (SCHEME == S_TOKEN_I8 && div == 0.f) {  // an all-zero row quantizes to 0 (the contract)
    for (int64_t i = b; i < e; ++i) q[i] = 0;
    return;
  }
  const bool fast = quotient_exact(div);
  // x * NaN is that NaN in every lane, as torch gives it; the product of two NaNs is its
  // first operand's, and which one that is the compiler chooses (the product commutes).
  const bool nan_mul = SCHEME == S_STATIC_FP8 && std::isnan(mul);
  for (int64_t i = b; i < e; i += L) {
    const __mmask16 m = lanes(e - i);
    const __m512 y = _mm512_maskz_loadu_ps(m, buf + i);
    __m512 v;
    if constexpr (SCHEME == S_STATIC_FP8) v = nan_mul ? vm : _mm512_mul_ps(y, vm);
    else v = fast ? vquot(y, vd, vm) : _mm512_div_ps(y, vd);
    __m128i c;
    if constexpr (kInt8) {
      c = int8_codes(v);
    } else {
      v = vclamp(v, p.qmax);
      c = p.fnuz ? e4m3_codes<true>(v) : e4m3_codes<false>(v);
    }
    _mm_mask_storeu_epi8(q + i, m, c);
  }
}

// The variant's epilogue (variant.cuh), element by element.
template <int SCHEME> void quant_span_variant(const Params& p, const float* buf, uint8_t* q,
                                              int64_t b, int64_t e, float mul, float div,
                                              float zp) {
  constexpr bool kInt8 = SCHEME == S_STATIC_I8 || SCHEME == S_TOKEN_I8;
  for (int64_t i = b; i < e; ++i)
    q[i] = variant_code<kInt8>(buf[i], div, mul, zp, p.variant, p.qmax, p.fnuz);
}

template <typename T, typename W, int PROD, int SCHEME, bool VAR>
void row_kernel_cpu(const Params& p, int64_t row, float* buf) {
  produce<T, W, PROD, SCHEME>(p, row, buf);
  if constexpr (SCHEME != S_NONE) {
    const int64_t H = p.hidden;
    uint8_t* q = static_cast<uint8_t*>(p.out) + row * H;
    const Variant& v = p.variant;
    float zp = 0.f;
    if constexpr (VAR) {
      if (v.zp != nullptr) zp = zero_point_of(v, row, 0);
    }
    float mul = 1.f, div = 1.f;
    if constexpr (SCHEME == S_STATIC_FP8 || SCHEME == S_STATIC_I8) {
      div = p.scale[0];
      mul = 1.0f / div;  // x * (1 / scale): static fp8's default; static int8 divides
    } else if constexpr (SCHEME == S_TOKEN_FP8 || SCHEME == S_TOKEN_I8) {
      float m = absmax(buf, 0, H);
      if constexpr (VAR) {
        if (p.scale_ub != nullptr) m = vx_min_nan(m, p.scale_ub[0]);
        div = variant_scale(m, v, 0);
        store_scale(p.scales, row * p.s_stride_t, div, v.scale);
      } else {
        if constexpr (SCHEME == S_TOKEN_FP8) {
          if (p.scale_ub != nullptr) m = vx_min_nan(m, p.scale_ub[0]);
          div = vx_max_nan(m / p.qmax, 1.0f / (p.qmax * 512.0f));
        } else {
          div = m / 127.0f;
        }
        p.scales[row * p.s_stride_t] = div;
      }
      mul = 1.0f / div;
    } else if constexpr (SCHEME == S_GROUP_FP8) {
      const int64_t gs = p.group_size;
      for (int64_t g = 0; g * gs < H; ++g) {
        const float m = absmax(buf, g * gs, (g + 1) * gs);
        const int64_t at = row * p.s_stride_t + g * p.s_stride_g;
        float s;
        if constexpr (VAR) {
          s = variant_scale(m, v, p.ue8m0);
          store_scale(p.scales, at, s, v.scale);
          const float gzp = v.zp != nullptr && v.zp_group_stride ? zero_point_of(v, row, g) : zp;
          quant_span_variant<SCHEME>(p, buf, q, g * gs, (g + 1) * gs, 1.0f / s, s, gzp);
        } else {
          s = vx_max_nan(m, p.group_eps) / p.qmax;
          if (p.ue8m0) s = exp2f(ceilf(log2f(s)));  // the contract's formula, rounded alike
          p.scales[at] = s;
          quant_span<SCHEME>(p, buf, q, g * gs, (g + 1) * gs, 1.0f / s, s);
        }
      }
      return;
    }
    if constexpr (VAR) quant_span_variant<SCHEME>(p, buf, q, 0, H, mul, div, zp);
    else quant_span<SCHEME>(p, buf, q, 0, H, mul, div);
  }
}

// Rows in parallel on torch's OpenMP pool; small problems stay on the calling thread (a
// parallel region costs more than a row of a few thousand values).
constexpr int64_t kParallelMin = 32 * 1024;

template <typename F> void for_rows(int64_t rows, int64_t hidden, F&& f) {
  const bool par = rows > 1 && rows * hidden >= kParallelMin && omp_get_max_threads() > 1;
#pragma omp parallel if (par)
  {
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>(hidden)) buf.resize(hidden);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) f(r, buf.data());
  }
}

template <typename T, typename W, int PROD, int SCHEME, bool VAR>
int launch(const Params& p) {
  for_rows(p.rows, p.hidden, [&](int64_t r, float* buf) {
    row_kernel_cpu<T, W, PROD, SCHEME, VAR>(p, r, buf);
  });
  return 0;
}

template <typename T, int PROD, int SCHEME, bool VAR>
int launch_w(const Params& p, int wdtype, int dtype) {
  if (p.weight == nullptr || wdtype == dtype) return launch<T, T, PROD, SCHEME, VAR>(p);
  if constexpr ((PROD == P_RMS_NORM || PROD == P_ADD_RMS_NORM) && !std::is_same_v<T, float>) {
    // Gemma-style float32 weight on f16/bf16 x, unfused or followed by any quant.
    if (wdtype == D_F32) return launch<T, float, PROD, SCHEME, VAR>(p);
  }
  return fail("unsupported weight dtype code %s%lld for this activation dtype", "", wdtype);
}

template <int PROD, int SCHEME, bool VAR = false>
int launch_dtype(const Params& p, int dtype, int wdtype) {
  switch (dtype) {
    case D_F32: return launch_w<float, PROD, SCHEME, VAR>(p, wdtype, dtype);
    case D_F16: return launch_w<f16_t, PROD, SCHEME, VAR>(p, wdtype, dtype);
    case D_BF16: return launch_w<bf16_t, PROD, SCHEME, VAR>(p, wdtype, dtype);
    default: return fail("unsupported activation dtype code %s%lld", "", dtype);
  }
}

template <int PROD, int SCHEME>
int launch_quant(const Params& p, int dtype, int wdtype) {
  if (p.has_variant) return launch_dtype<PROD, SCHEME, true>(p, dtype, wdtype);
  return launch_dtype<PROD, SCHEME, false>(p, dtype, wdtype);
}

template <int PROD>
int launch_scheme(const Params& p, int scheme, int dtype, int wdtype) {
  switch (scheme) {
    case S_NONE:
      if constexpr (PROD == P_IDENTITY) return fail("a quant launch needs a scheme%s", "");
      else return launch_dtype<PROD, S_NONE>(p, dtype, wdtype);
    case S_STATIC_FP8: return launch_quant<PROD, S_STATIC_FP8>(p, dtype, wdtype);
    case S_STATIC_I8: return launch_quant<PROD, S_STATIC_I8>(p, dtype, wdtype);
    case S_TOKEN_FP8: return launch_quant<PROD, S_TOKEN_FP8>(p, dtype, wdtype);
    case S_TOKEN_I8: return launch_quant<PROD, S_TOKEN_I8>(p, dtype, wdtype);
    case S_GROUP_FP8:
      if (p.group_size <= 0 || p.hidden % p.group_size != 0)
        return fail("group_size %s%lld must divide the hidden size", "", p.group_size);
      return launch_quant<PROD, S_GROUP_FP8>(p, dtype, wdtype);
    default: return fail("unknown quant scheme code %s%lld", "", scheme);
  }
}

int launch_act(const Params& p, int act, int scheme, int dtype) {
  switch (act) {
    case P_SILU_MUL: return launch_scheme<P_SILU_MUL>(p, scheme, dtype, dtype);
    case P_GELU_MUL: return launch_scheme<P_GELU_MUL>(p, scheme, dtype, dtype);
    case P_GELU_TANH_MUL: return launch_scheme<P_GELU_TANH_MUL>(p, scheme, dtype, dtype);
    default: return fail("unknown activation code %s%lld", "", act);
  }
}

// Dynamic per-tensor: the absmax of every row (NaN kept), reduced over the threads.
template <typename T> float tensor_absmax(const Params& p) {
  float m = 0.f;
  const bool par = p.rows * p.hidden >= kParallelMin && omp_get_max_threads() > 1;
#pragma omp parallel if (par)
  {
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>(p.hidden)) buf.resize(p.hidden);
    float local = 0.f;
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < p.rows; ++r) {
      Params one = p;
      produce<T, T, P_IDENTITY, S_STATIC_FP8>(one, r, buf.data());
      local = vx_max_nan(local, absmax(buf.data(), 0, p.hidden));
    }
#pragma omp critical
    m = vx_max_nan(m, local);
  }
  return m;
}

}  // namespace

// The launchers of vx_kernels.cu, argument for argument (library.py's SIGNATURES); the
// stream arguments are unused.
extern "C" {

const char* vx_last_error(void) { return g_error; }

int vx_check_device(void) { return 0; }  // the host is always there

int vx_use_device(int) { return 0; }

int vx_rms_norm(void* out, const void* x, const void* weight, int64_t rows, int64_t hidden,
                int64_t x_stride, int64_t var_size, float eps, int dtype, int wdtype, void*) {
  Params p = {};
  p.x = x; p.weight = weight; p.out = out;
  p.rows = rows; p.hidden = hidden; p.x_stride = x_stride; p.out_stride = hidden;
  p.var_size = var_size; p.eps = eps;
  return launch_scheme<P_RMS_NORM>(p, S_NONE, dtype, wdtype);
}

int vx_fused_add_rms_norm(void* out, void* residual_out, const void* x, const void* residual,
                          const void* weight, int64_t rows, int64_t hidden, int64_t x_stride,
                          int64_t r_stride, int64_t out_stride, int64_t ro_stride, float eps,
                          int rounded_sum, int dtype, int wdtype, void*) {
  Params p = {};
  p.x = x; p.residual = residual; p.weight = weight; p.out = out; p.residual_out = residual_out;
  p.rows = rows; p.hidden = hidden; p.x_stride = x_stride; p.r_stride = r_stride;
  p.out_stride = out_stride; p.ro_stride = ro_stride; p.var_size = hidden; p.eps = eps;
  p.rounded_sum = rounded_sum;
  return launch_scheme<P_ADD_RMS_NORM>(p, S_NONE, dtype, wdtype);
}

int vx_act_and_mul(void* out, const void* x, const void* up, int64_t rows, int64_t d,
                   int64_t x_stride, int64_t up_stride, int act, int dtype, void*) {
  Params p = {};
  p.x = x; p.up = up; p.out = out; p.rows = rows; p.hidden = d; p.x_stride = x_stride;
  p.up_stride = up_stride; p.out_stride = d;
  return launch_act(p, act, S_NONE, dtype);
}

int vx_quant(void* q, float* scales, const void* x, int64_t rows, int64_t hidden, int64_t x_stride,
             VX_QUANT_ARGS, int dtype, void*) {
  Params p = VX_QUANT_PARAMS(q, scales);
  p.x = x; p.rows = rows; p.hidden = hidden; p.x_stride = x_stride;
  return launch_scheme<P_IDENTITY>(p, scheme, dtype, dtype);
}

int vx_rms_norm_quant(void* q, float* scales, const void* x, const void* weight, int64_t rows,
                      int64_t hidden, int64_t x_stride, float eps, VX_QUANT_ARGS, int dtype,
                      int wdtype, void*) {
  Params p = VX_QUANT_PARAMS(q, scales);
  p.x = x; p.weight = weight; p.rows = rows; p.hidden = hidden; p.x_stride = x_stride;
  p.var_size = hidden; p.eps = eps;
  return launch_scheme<P_RMS_NORM>(p, scheme, dtype, wdtype);
}

int vx_fused_add_rms_norm_quant(void* q, void* residual_out, float* scales, const void* x,
                                const void* residual, const void* weight, int64_t rows,
                                int64_t hidden, int64_t x_stride, int64_t r_stride, float eps,
                                int rounded_sum, VX_QUANT_ARGS, int dtype, int wdtype, void*) {
  Params p = VX_QUANT_PARAMS(q, scales);
  p.x = x; p.residual = residual; p.weight = weight; p.residual_out = residual_out;
  p.rows = rows; p.hidden = hidden; p.x_stride = x_stride; p.r_stride = r_stride;
  p.ro_stride = hidden; p.var_size = hidden; p.eps = eps; p.rounded_sum = rounded_sum;
  return launch_scheme<P_ADD_RMS_NORM>(p, scheme, dtype, wdtype);
}

int vx_act_and_mul_quant(void* q, float* scales, const void* x, const void* up, int64_t rows,
                         int64_t d, int64_t x_stride, int64_t up_stride, int act, VX_QUANT_ARGS,
                         int dtype, void*) {
  Params p = VX_QUANT_PARAMS(q, scales);
  p.x = x; p.up = up; p.rows = rows; p.hidden = d; p.x_stride = x_stride; p.up_stride = up_stride;
  return launch_act(p, act, scheme, dtype);
}

int vx_dynamic_scaled_fp8_quant(void* q, float* scale, const void* x, int64_t rows, int64_t hidden,
                                int64_t x_stride, int fnuz, float qmax, const Variant* variant,
                                float* scale_out, int dtype, void*) {
  Params p = quant_params(q, nullptr, scale, nullptr, fnuz, 0, 0, 0, 0, 0.f, qmax, variant);
  p.x = x; p.rows = rows; p.hidden = hidden; p.x_stride = x_stride;
  float m;
  switch (dtype) {
    case D_F32: m = tensor_absmax<float>(p); break;
    case D_F16: m = tensor_absmax<f16_t>(p); break;
    case D_BF16: m = tensor_absmax<bf16_t>(p); break;
    default: return fail("unsupported activation dtype code %s%lld", "", dtype);
  }
  if (variant != nullptr) {
    const float s = variant_scale(m, *variant, 0);
    scale[0] = s;
    store_scale(scale_out, 0, s, variant->scale);
  } else {
    scale[0] = vx_max_nan(m / qmax, 1.0f / (qmax * 512.0f));
  }
  return launch_scheme<P_IDENTITY>(p, S_STATIC_FP8, dtype, dtype);
}

}  // extern "C"
