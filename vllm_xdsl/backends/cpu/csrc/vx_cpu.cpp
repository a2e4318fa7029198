// The CUDA backend's kernel library (backends/cuda/csrc), built for the host CPU: the same
// extern "C" launchers, Params, producers, schemes, variant epilogue and scalar numerics
// (kernels.cuh, variant.cuh, numerics.h), with the row kernel written for SIMD instead of a
// GPU block: one row per OpenMP iteration (torch's own thread pool: torch bundles the
// libgomp this links against, so torch.set_num_threads governs it), 16 lanes of f32 per
// step, masked loads and stores for the row tails. The 16 lanes are vx_vec.h's: AVX-512
// registers, or two AVX2 halves where the CPU has no AVX-512, with the same bits either way.
//
// Numerics: as kernels.cuh. Every value is rounded exactly where the contract rounds (bf16
// and f16 round to nearest even, fp8 e4m3fn / e4m3fnuz rounds to nearest even after the
// clamp, int8 rounds half to even and saturates, NaN kept as torch keeps it); the row sums
// (squares, absmax) are reduced in 16 lanes, in one order on either ISA, not in torch's
// order. A quant variant (VAR) takes variant.cuh's scalar epilogue per element, but for
// the recip variant alone (recip_only), vectorized as the default numerics are.
#include <omp.h>
#include <stdio.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels.cuh"  // built with -DVX_EMUL: the host definitions of the device names
#include "vx_launchers.h"  // the declarations the definitions below must match
#include "vx_vec.h"

using namespace vx;
using namespace vx::vec;

namespace {

enum DType { D_F32 = 0, D_F16 = 1, D_BF16 = 2 };

thread_local char g_error[512] = "";

int fail(const char* fmt, const char* a = "", long long b = 0) {
  snprintf(g_error, sizeof(g_error), fmt, a, b);
  return 1;
}

// --- loads, stores and roundings of 16 values ---------------------------------------------

template <typename T> VX_VEC_INLINE V vload(const T* p, Tail m);
template <> VX_VEC_INLINE V vload<float>(const float* p, Tail m) { return load_f32(p, m); }
template <> VX_VEC_INLINE V vload<f16_t>(const f16_t* p, Tail m) {
  return from_f16(load_u16(p, m));
}
template <> VX_VEC_INLINE V vload<bf16_t>(const bf16_t* p, Tail m) {
  return floats(vslli<16>(widen16(load_u16(p, m))));
}

// f32 -> bf16 bits (in the high half of each lane), round to nearest even, NaN made quiet:
// vx_float_to_bf16 of numerics.h, lane by lane.
VX_VEC_INLINE VI bf16_bits(V v) {
  const VI u = bits(v);
  const VI lsb = vand(vsrli<16>(u), iset1(1));
  const VI r = vselect(is_nan(v), vor(u, iset1(0x400000)), vadd(u, vadd(lsb, iset1(0x7fff))));
  return vand(r, iset1(static_cast<int>(0xffff0000u)));
}

// 16 bf16 codes of v, rounded to nearest even. AVX512-BF16's conversion does that in one
// instruction but flushes denormal inputs to zero: lanes with a denormal (rare) take the
// integer rounding instead, so the result is vx_float_to_bf16's in every lane.
VX_VEC_INLINE __m256i bf16_codes(V v) {
#ifdef __AVX512BF16__
  __m256i r = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 denormal = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000)) &
                             _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x007fffff));
  if (__builtin_expect(denormal != 0, 0))
    r = _mm256_mask_mov_epi16(r, denormal, narrow16(vsrli<16>(bf16_bits(v))));
  return r;
#else
  return narrow16(vsrli<16>(bf16_bits(v)));
#endif
}

VX_VEC_INLINE V bf16_widen(__m256i codes) { return floats(vslli<16>(widen16(codes))); }

// bf16_bits without the NaN lanes and without clearing the low halves: fewer steps.
VX_VEC_INLINE VI bf16_bits_nonan(V v) {
  const VI u = bits(v);
  return vadd(u, vadd(vand(vsrli<16>(u), iset1(1)), iset1(0x7fff)));
}

// The value v takes once stored in dtype T (a rounding point of the contract). NO_NAN: the
// caller knows no lane is NaN (a lane that is inf is fine), which spares bf16's NaN test.
template <typename T, bool NO_NAN = false> VX_VEC_INLINE V vround(V v) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    if constexpr (NO_NAN) {
      return floats(vand(bf16_bits_nonan(v), iset1(static_cast<int>(0xffff0000u))));
    }
#ifdef __AVX512BF16__
    return bf16_widen(bf16_codes(v));
#else
    return floats(bf16_bits(v));  // already the rounded value: no trip through 16-bit codes
#endif
  } else if constexpr (std::is_same_v<T, f16_t>) {
    return from_f16(f16_codes(v));
  } else {
    return v;
  }
}

template <typename T> VX_VEC_INLINE void vstore(T* p, V v, Tail m) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    store_u16(p, m, bf16_codes(v));
  } else if constexpr (std::is_same_v<T, f16_t>) {
    store_u16(p, m, f16_codes(v));
  } else {
    store_f32(p, m, v);
  }
}

// Store v, already a value of T (vround<T>): bf16 keeps the high halves, no rounding left.
template <typename T> VX_VEC_INLINE void vstore_exact(T* p, V v, Tail m) {
  if constexpr (std::is_same_v<T, bf16_t>) {
    store_u16(p, m, narrow16(vsrli<16>(bits(v))));
  } else {
    vstore<T>(p, v, m);
  }
}

// Store v rounded to T (NO_NAN: no lane is NaN, which spares bf16's NaN test), and give
// the rounded value (a caller that drops it pays nothing for it: the steps are inlined).
template <typename T, bool NO_NAN> VX_VEC_INLINE V vstore_rounded(T* p, V v, Tail m) {
  if constexpr (std::is_same_v<T, bf16_t> && NO_NAN) {
    const VI r = bf16_bits_nonan(v);  // the codes in the high halves
    store_u16(p, m, narrow16(vsrli<16>(r)));
    return floats(vand(r, iset1(static_cast<int>(0xffff0000u))));
  } else if constexpr (std::is_same_v<T, bf16_t>) {
    const __m256i c = bf16_codes(v);
    store_u16(p, m, c);
    return bf16_widen(c);
  } else if constexpr (std::is_same_v<T, f16_t>) {
    const __m256i c = f16_codes(v);
    store_u16(p, m, c);
    return from_f16(c);
  } else {
    store_f32(p, m, v);
    return v;
  }
}

VX_VEC_INLINE V vabs(V v) { return floats(vand(bits(v), iset1(0x7fffffff))); }

// clamp(v, -qmax, qmax) keeping NaN (vx_min_nan(vx_max_nan(v, -qmax), qmax)): vmax and
// vmin return their second operand when one is NaN.
VX_VEC_INLINE V vclamp(V v, float qmax) { return vmin(vset1(qmax), vmax(vset1(-qmax), v)); }

// vx_float_to_e4m3<FNUZ> of a clamped value (|v| <= FMAX or NaN), lane by lane.
template <bool FNUZ> VX_VEC_INLINE __m128i e4m3_codes(V v) {
  constexpr int bias = FNUZ ? 8 : 7;
  const VI u = bits(v);
  const VI sign = vand(vsrli<24>(u), iset1(0x80));
  const VI a = vand(u, iset1(0x7fffffff));
  // Below the smallest normal: a multiple of the subnormal step, rounded half to even by
  // the conversion (default rounding mode), as rintf does in numerics.h.
  const VI sub = vcvt_i32(vmul(floats(a), vset1(static_cast<float>(1 << (bias + 2)))));
  const VI r = vadd(a, vadd(iset1(0x7ffff), vand(vsrli<20>(a), iset1(1))));
  const VI e = vsub(vsrli<23>(r), iset1(127 - bias));
  VI norm = vor(vslli<3>(e), vand(vsrli<20>(r), iset1(7)));
  const int max_code = FNUZ ? 0x7f : 0x7e;
  norm = vselect(vcmpgt_u32(e, iset1(15)), iset1(max_code + 1), norm);
  norm = vmin_u32(norm, iset1(max_code));
  const Pred is_sub = vcmplt_u32(a, iset1((127 + 1 - bias) << 23));
  VI code = vor(vselect(is_sub, sub, norm), sign);
  if constexpr (FNUZ) {  // no negative zero; NaN is 0x80
    code = vselect(vcmpeq(vand(code, iset1(0x7f)), izero()), izero(), code);
  }
  const Pred nan = vcmpgt_u32(a, iset1(0x7f800000));
  code = vselect(nan, FNUZ ? iset1(0x80) : vor(sign, iset1(0x7f)), code);
  return narrow8(code);
}

// vx_float_to_int8: NaN gives 0; round half to even; saturate to [-128, 127]. Clamped
// above first (an integer bound: the same), so that the conversion gives INT_MIN (the
// value it gives out of range) only below -2^31, which the saturating narrowing makes -128
// as it makes any value below -128.
VX_VEC_INLINE __m128i int8_codes(V v) {
  return narrow8_sat(vcvt_i32(vmin(zero_nan(v), vset1(127.f))));
}

// e^v to about 1 ulp: 2^n * e^r with |r| <= ln2 / 2; scalef gives inf / 0 past the range.
VX_VEC_INLINE V vexp(V v) {
  v = vmin(vmax(v, vset1(-104.f)), vset1(89.f));
  const V n = vrint(vmul(v, vset1(1.44269504088896341f)));
  V r = vfnmadd(n, vset1(0.693359375f), v);
  r = vfnmadd(n, vset1(-2.12194440e-4f), r);
  V p = vset1(1.9875691500e-4f);
  p = vfmadd(p, r, vset1(1.3981999507e-3f));
  p = vfmadd(p, r, vset1(8.3334519073e-3f));
  p = vfmadd(p, r, vset1(4.1665795894e-2f));
  p = vfmadd(p, r, vset1(1.6666665459e-1f));
  p = vfmadd(p, r, vset1(5.0000001201e-1f));
  p = vfmadd(p, vmul(r, r), vadd(r, vset1(1.f)));
  return vscalef(p, n);
}

// erf(x) to about an ulp, as erff: x * P(x^2) for |x| < 1; else, with v = 1 / |x|,
// sign(x) * (1 - exp(-x^2) * h(v) * v), h(v) = erfc(1/v) exp(1/v^2) / v. P and h are least-
// squares fits (relative error 1.2e-9 and 5.8e-10; h in v - 0.6275 on [1/3.92, 1], where
// its terms stay small in f32); past |x| = 3.92 erf is 1 in f32. exp(-x^2) takes x^2 as
// hi + lo (one fma), so the square's rounding does not reach the exponent.
VX_VEC_INLINE V verf(V x) {
  const V ax = vabs(x);
  const V t = vmul(x, x);
  V p = vset1(7.853932038415223e-05f);
  p = vfmadd(p, t, vset1(-0.0008010215242393315f));
  p = vfmadd(p, t, vset1(0.005188330076634884f));
  p = vfmadd(p, t, vset1(-0.026853812858462334f));
  p = vfmadd(p, t, vset1(0.1128358542919159f));
  p = vfmadd(p, t, vset1(-0.3761262595653534f));
  p = vfmadd(p, t, vset1(1.1283791065216064f));
  const V small = vmul(x, p);
  const V xc = vmin(vset1(3.92f), ax);  // NaN stays NaN (vmin's second operand)
  const V v = vdiv(vset1(1.f), xc);
  const V w = vsub(v, vset1(0.6275510191917419f));
  V h = vset1(0.02123871073126793f);
  h = vfmadd(h, w, vset1(-0.04698672145605087f));
  h = vfmadd(h, w, vset1(0.04633352532982826f));
  h = vfmadd(h, w, vset1(-0.02374192327260971f));
  h = vfmadd(h, w, vset1(-0.010735563933849335f));
  h = vfmadd(h, w, vset1(0.04946117848157883f));
  h = vfmadd(h, w, vset1(-0.0773986205458641f));
  h = vfmadd(h, w, vset1(0.07130853831768036f));
  h = vfmadd(h, w, vset1(-0.0007458865293301642f));
  h = vfmadd(h, w, vset1(-0.17159084975719452f));
  h = vfmadd(h, w, vset1(0.4890870749950409f));
  const V hi = vmul(xc, xc);
  const V minus_lo = vfnmadd(xc, xc, hi);  // hi - x^2, exactly
  const V e = vmul(vexp(vsub(vzero(), hi)), vadd(vset1(1.f), minus_lo));
  const V big = vsub(vset1(1.f), vmul(vmul(e, h), v));
  const V signed_big = floats(vor(bits(big), vand(bits(x), iset1(static_cast<int>(0x80000000u)))));
  return vselect(vcmplt_u32(bits(ax), iset1(0x3f800000)), small, signed_big);  // |x| < 1
}

// tanh(u) to about an ulp, as tanhf: u + u^3 Q(u^2) for |u| < 0.5625 (Q a least-squares
// fit, relative error 1.2e-9); else sign(u) * (1 - 2 / (exp(2|u|) + 1)), 1 in f32 past 9.1.
VX_VEC_INLINE V vtanh(V u) {
  const V au = vabs(u);
  const V t = vmul(u, u);
  V q = vset1(-0.006140018813312054f);
  q = vfmadd(q, t, vset1(0.020973019301891327f));
  q = vfmadd(q, t, vset1(-0.053826622664928436f));
  q = vfmadd(q, t, vset1(0.1333230435848236f));
  q = vfmadd(q, t, vset1(-0.3333330452442169f));
  const V small = vfmadd(vmul(u, t), q, u);
  const V uc = vmin(vset1(9.1f), au);  // NaN stays NaN (vmin's second operand)
  const V e = vexp(vadd(uc, uc));
  const V big = vsub(vset1(1.f), vdiv(vset1(2.f), vadd(e, vset1(1.f))));
  const V signed_big = floats(vor(bits(big), vand(bits(u), iset1(static_cast<int>(0x80000000u)))));
  return vselect(vcmplt_u32(bits(au), iset1(0x3f100000)), small, signed_big);  // |u| < 0.5625
}

// Activations in f32, in kernels.cuh's formulas and operation order (torch's), with erf and
// tanh evaluated as above instead of the C library's erff / tanhf, lane by lane.
template <int PROD> VX_VEC_INLINE V vactivation(V a) {
  if constexpr (PROD == P_SILU_MUL) {
    const V e = vexp(vsub(vzero(), a));
    return vdiv(a, vadd(vset1(1.f), e));
  } else if constexpr (PROD == P_GELU_MUL) {
    return vmul(vmul(a, vset1(0.5f)), vadd(vset1(1.f), verf(vmul(a, vset1(0.70710678118654752f)))));
  } else {
    static_assert(PROD == P_GELU_TANH_MUL);
    const V cube = vmul(vmul(vmul(vset1(0.044715f), a), a), a);
    const V u = vmul(vset1(0.79788456080286536f), vadd(a, cube));
    return vmul(vmul(vset1(0.5f), a), vadd(vset1(1.f), vtanh(u)));
  }
}

// RN(x / s), the division the contract writes, without a division (one vdivps is several
// times the cost of the rest of a quant step): with inv = RN(1 / s), y = RN(x * inv) is
// within an ulp of x / s, r = x - y * s is exact (one fma), and RN(y + r * inv) is the
// correctly rounded quotient (Markstein's theorem). It needs s and 1 / s normal (the caller
// checks: quotient_exact) and a finite y; where y is inf, NaN or zero, y is x / s already
// (the fma would lose a zero's sign; a quotient that underflows quantizes to 0 either way).
VX_VEC_INLINE V vquot(V x, V s, V inv) {
  const V y = vmul(x, inv);
  const V r = vfnmadd(y, s, x);
  const V q = vfmadd(r, inv, y);
  return vselect(is_special(y), y, q);
}

bool quotient_exact(float s) {
  const float a = fabsf(s);
  return a > 1.2e-38f && a < 8.0e37f;  // s and 1 / s both normal
}

// A row's values in f32 as the quant reads them: the producer's, from the row buffer, or
// (an unfused quant) x's own, read in place.
struct FromBuffer {
  const float* buf;
  VX_VEC_INLINE V operator()(int64_t i, Tail m) const { return load_f32(buf + i, m); }
};
template <typename T> struct FromInput {
  const T* x;
  VX_VEC_INLINE V operator()(int64_t i, Tail m) const { return vload<T>(x + i, m); }
};

// body(i, m) over [b, e), L lanes at a time: the whole chunks with the constant kAll (their
// loads and stores compile unmasked), then the tail, masked. Both inlined, so that the
// constant reaches them.
#define VX_VEC_INLINE_LAMBDA __attribute__((always_inline))
template <typename F>
inline __attribute__((always_inline)) void for_lanes(int64_t b, int64_t e, const F& body) {
  int64_t i = b;
  for (; i + L <= e; i += L) body(i, kAll);
  if (i < e) body(i, lanes(e - i));
}

// absmax of the values [b, e) keeping NaN (vx_max_nan over the values).
template <typename Src> float absmax(const Src& src, int64_t b, int64_t e) {
  V m = vzero();
  Pred nan = pnone();
  for_lanes(b, e, [&](int64_t i, Tail t) VX_VEC_INLINE_LAMBDA {
    const V a = vabs(src(i, t));
    nan = por(nan, is_nan(a));
    m = vmax(m, a);
  });
  return any_lane(nan) ? NAN : hmax(m);
}

// --- one row ------------------------------------------------------------------------------

// A norm's weight: its values widened to f32 once per launch where a launch has rows enough
// to repay it (else null), and whether they are all finite (all_finite).
struct NormWeight {
  const float* f32;
  bool finite;
};

// y.to(weight.dtype) * weight, before the product's rounding: to the weight's dtype, then
// to T, which is one rounding to T (the weight's dtype is T or f32). W32: read weight_f32.
template <typename W, bool NO_NAN, bool W32>
VX_VEC_INLINE V weighted(V y, const void* weight, const float* weight_f32, int64_t i, Tail m) {
  const V w = W32 ? load_f32(weight_f32 + i, m) : vload<W>(static_cast<const W*>(weight) + i, m);
  return vmul(vround<W, NO_NAN>(y), w);
}

// Whether the H values of a weight are all finite: with a finite y = x * rsqrt(var + eps),
// the norm's products then hold no NaN (finite times finite, rounded, is finite or inf).
template <typename W> bool all_finite(const void* weight, int64_t H) {
  if (weight == nullptr) return true;
  Pred bad = pnone();
  const W* w = static_cast<const W*>(weight);
  for (int64_t i = 0; i < H; i += L) {
    const V a = vload<W>(w + i, lanes(H - i));
    bad = por(bad, is_nan(vsub(a, a)));  // a - a is NaN for inf and NaN only
  }
  return !any_lane(bad);
}

// The norm's second pass over a row: its f32 input (buf) times inv, times the weight (if
// any), rounded to T into out, or (out null: a quant follows) back into buf. NO_NAN: no
// lane is NaN; W32: the weight is read widened (weight_f32).
template <typename T, typename W, bool NO_NAN, bool W32>
void normalize(T* out, float* buf, int64_t H, float inv_s, const void* weight,
               const float* weight_f32) {
  const V inv = vset1(inv_s);
  for (int64_t j = 0; j < H; j += L) {
    const Tail m = lanes(H - j);
    V y = vmul(load_f32(buf + j, m), inv);
    if (weight != nullptr) y = weighted<W, NO_NAN, W32>(y, weight, weight_f32, j, m);
    if (out != nullptr) vstore_rounded<T, NO_NAN>(out + j, y, m);
    else store_f32(buf + j, m, vround<T, NO_NAN>(y));
  }
}

// The producer's values of `row`, rounded to T as the contract materializes them, into buf
// (or, with SCHEME == S_NONE, straight into out). Writes residual_out for the fused add.
// nw: the norm's weight (read by the norms only).
template <typename T, typename W, int PROD, int SCHEME>
void produce(const Params& p, int64_t row, float* buf, const NormWeight& nw) {
  const int64_t H = p.hidden;
  const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
  T* out = SCHEME == S_NONE ? static_cast<T*>(p.out) + row * p.out_stride : nullptr;
  if constexpr (PROD == P_IDENTITY) {
    for (int64_t i = 0; i < H; i += L) {
      const Tail m = lanes(H - i);
      store_f32(buf + i, m, vload<T>(x + i, m));
    }
  } else if constexpr (kIsAct<PROD>) {
    const T* u = p.up != nullptr ? static_cast<const T*>(p.up) + row * p.up_stride : x + H;
    for (int64_t i = 0; i < H; i += L) {
      const Tail m = lanes(H - i);
      const V a = vround<T>(vactivation<PROD>(vload<T>(x + i, m)));
      const V y = vround<T>(vmul(a, vload<T>(u + i, m)));
      if constexpr (SCHEME == S_NONE) vstore_exact<T>(out + i, y, m);
      else store_f32(buf + i, m, y);
    }
  } else {
    const T* r = PROD == P_ADD_RMS_NORM ? static_cast<const T*>(p.residual) + row * p.r_stride
                                        : nullptr;
    T* r_out = PROD == P_ADD_RMS_NORM ? static_cast<T*>(p.residual_out) + row * p.ro_stride
                                      : nullptr;
    // The norm's f32 input (x, or x + residual, rounded to T with rounded_sum) into buf:
    // read before anything is written, so out / residual_out may alias x / residual.
    V acc0 = vzero(), acc1 = vzero();
    const int64_t vs = p.var_size;
    auto input = [&](int64_t i, Tail m) {
      V s = vload<T>(x + i, m);
      if constexpr (PROD == P_ADD_RMS_NORM) {
        s = vadd(s, vload<T>(r + i, m));
        // No NaN test: a NaN sum of two bf16 values (a NaN operand's, quieted, or inf - inf's
        // default NaN) has its low 16 bits zero, which the integer rounding keeps as they are.
        const V rounded = vstore_rounded<T, true>(r_out + i, s, m);
        if (p.rounded_sum) s = rounded;
      }
      store_f32(buf + i, m, s);
      return s;
    };
    int64_t i = 0;
    for (; i + 2 * L <= vs; i += 2 * L) {  // two accumulators: two adds in flight
      const V s0 = input(i, kAll), s1 = input(i + L, kAll);
      acc0 = vfmadd(s0, s0, acc0);
      acc1 = vfmadd(s1, s1, acc1);
    }
    for (; i < vs; i += L) {
      const Tail m = lanes(vs - i);
      const V s = input(i, m);
      acc0 = vadd(acc0, maskz(m, vmul(s, s)));
    }
    for (i = vs; i < H; i += L) input(i, lanes(H - i));  // past variance_size
    const float var = hsum(vadd(acc0, acc1)) / static_cast<float>(vs);
    const float inv_s = 1.0f / sqrtf(var + p.eps);  // torch.rsqrt: 1 / sqrt
    // A finite variance over the whole row makes every input finite and |y| <= sqrt(H); a
    // finite weight then gives no NaN (a product may overflow to inf, which rounds alike).
    const bool no_nan = vs == H && std::isfinite(var) && std::isfinite(inv_s) && nw.finite;
    T* const dst = SCHEME == S_NONE ? out : nullptr;
    const void* const w = p.weight;
    if constexpr (!std::is_same_v<W, float>) {  // an f32 weight is never widened
      if (nw.f32 != nullptr) {
        if (no_nan) normalize<T, W, true, true>(dst, buf, H, inv_s, w, nw.f32);
        else normalize<T, W, false, true>(dst, buf, H, inv_s, w, nw.f32);
        return;
      }
    }
    if (no_nan) normalize<T, W, true, false>(dst, buf, H, inv_s, w, nullptr);
    else normalize<T, W, false, false>(dst, buf, H, inv_s, w, nullptr);
  }
}

// Quantize the values [b, e) into q: y * mul with `recip` (static fp8's default numerics,
// and the recip variant), else y / div.
template <int SCHEME, typename Src>
void quant_span(const Params& p, const Src& src, uint8_t* q, int64_t b, int64_t e, float mul,
                float div, bool recip) {
  constexpr bool kInt8 = SCHEME == S_STATIC_I8 || SCHEME == S_TOKEN_I8;
  const V vm = vset1(mul), vd = vset1(div);
  if (SCHEME == S_TOKEN_I8 && div == 0.f) {  // an all-zero row quantizes to 0 (the contract)
    for (int64_t i = b; i < e; ++i) q[i] = 0;
    return;
  }
  const bool fast = quotient_exact(div);
  // x * NaN is that NaN in every lane, as torch gives it; the product of two NaNs is its
  // first operand's, and which one that is the compiler chooses (the product commutes).
  const bool nan_mul = recip && std::isnan(mul);
  for_lanes(b, e, [&](int64_t i, Tail m) VX_VEC_INLINE_LAMBDA {
    const V y = src(i, m);
    V v;
    if (recip) v = nan_mul ? vm : vmul(y, vm);
    else v = fast ? vquot(y, vd, vm) : vdiv(y, vd);
    __m128i c;
    if constexpr (kInt8) {
      c = int8_codes(v);
    } else {
      v = vclamp(v, p.qmax);
      c = p.fnuz ? e4m3_codes<true>(v) : e4m3_codes<false>(v);
    }
    store_u8(q + i, m, c);
  });
}

// A variant whose epilogue is quant_span's with `recip` (no rounding of the quotient, no
// zero point): vLLM's CPU int8 quants, raised, are this one, and take the vector path.
bool recip_only(const Variant& v) {
  return v.recip && v.quotient == R_F32 && v.zp == nullptr;
}

// The variant's epilogue (variant.cuh), element by element.
template <int SCHEME> void quant_span_variant(const Params& p, const float* buf, uint8_t* q,
                                              int64_t b, int64_t e, float mul, float div,
                                              float zp) {
  constexpr bool kInt8 = SCHEME == S_STATIC_I8 || SCHEME == S_TOKEN_I8;
  for (int64_t i = b; i < e; ++i)
    q[i] = variant_code<kInt8>(buf[i], div, mul, zp, p.variant, p.qmax, p.fnuz);
}

// Quantize one row: its values from `src`, and from `buf` where a variant goes element by
// element (null where it does not: the default numerics and recip_only).
template <int SCHEME, bool VAR, typename Src>
void quantize_row(const Params& p, int64_t row, const Src& src, const float* buf) {
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
    float m = absmax(src, 0, H);
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
      const float m = absmax(src, g * gs, (g + 1) * gs);
      const int64_t at = row * p.s_stride_t + g * p.s_stride_g;
      float s;
      if constexpr (VAR) {
        s = variant_scale(m, v, p.ue8m0);
        store_scale(p.scales, at, s, v.scale);
        const float gzp = v.zp != nullptr && v.zp_group_stride ? zero_point_of(v, row, g) : zp;
        if (recip_only(v)) quant_span<SCHEME>(p, src, q, g * gs, (g + 1) * gs, 1.0f / s, s, true);
        else quant_span_variant<SCHEME>(p, buf, q, g * gs, (g + 1) * gs, 1.0f / s, s, gzp);
      } else {
        s = vx_max_nan(m, p.group_eps) / p.qmax;
        if (p.ue8m0) s = exp2f(ceilf(log2f(s)));  // the contract's formula, rounded alike
        p.scales[at] = s;
        quant_span<SCHEME>(p, src, q, g * gs, (g + 1) * gs, 1.0f / s, s, false);
      }
    }
    return;
  }
  if constexpr (VAR) {
    if (recip_only(v)) quant_span<SCHEME>(p, src, q, 0, H, mul, div, true);
    else quant_span_variant<SCHEME>(p, buf, q, 0, H, mul, div, zp);
  } else {
    quant_span<SCHEME>(p, src, q, 0, H, mul, div, SCHEME == S_STATIC_FP8);
  }
}

// One row: the producer's values into buf, then (SCHEME != S_NONE) their quant. An unfused
// quant reads x in place, save for a variant that goes element by element.
template <typename T, typename W, int PROD, int SCHEME, bool VAR>
void row_kernel_cpu(const Params& p, int64_t row, float* buf, const NormWeight& nw) {
  if constexpr (PROD == P_IDENTITY && SCHEME != S_NONE) {
    if (!VAR || recip_only(p.variant)) {
      const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
      return quantize_row<SCHEME, VAR>(p, row, FromInput<T>{x}, nullptr);
    }
  }
  produce<T, W, PROD, SCHEME>(p, row, buf, nw);
  if constexpr (SCHEME != S_NONE) quantize_row<SCHEME, VAR>(p, row, FromBuffer{buf}, buf);
}

// Rows in parallel on torch's OpenMP pool; small problems stay on the calling thread (a
// parallel region costs more than a row of a few thousand values).
constexpr int64_t kParallelMin = 32 * 1024;
// A norm widens a 16-bit weight to f32 once for this many rows or more (fewer: per row).
constexpr int64_t kWidenRows = 4;

template <typename F> void for_rows(int64_t rows, int64_t hidden, F&& f) {
  const auto row_buffer = [hidden] {
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>(hidden)) buf.resize(hidden);
    return buf.data();
  };
  if (rows <= 1 || rows * hidden < kParallelMin || omp_get_max_threads() <= 1) {
    // Not even a team of one: entering a parallel region costs more than a short row.
    float* const buf = row_buffer();
    for (int64_t r = 0; r < rows; ++r) f(r, buf);
    return;
  }
#pragma omp parallel
  {
    float* const buf = row_buffer();
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) f(r, buf);
  }
}

template <typename T, typename W, int PROD, int SCHEME, bool VAR>
int launch(const Params& p) {
  constexpr bool kNorm = PROD == P_RMS_NORM || PROD == P_ADD_RMS_NORM;
  NormWeight nw = {nullptr, kNorm && all_finite<W>(p.weight, p.hidden)};
  std::vector<float> w32;
  if (kNorm && !std::is_same_v<W, float> && p.weight != nullptr && p.rows >= kWidenRows) {
    w32.resize(p.hidden);
    const W* w = static_cast<const W*>(p.weight);
    for (int64_t i = 0; i < p.hidden; i += L) {
      const Tail m = lanes(p.hidden - i);
      store_f32(w32.data() + i, m, vload<W>(w + i, m));
    }
    nw.f32 = w32.data();
  }
  for_rows(p.rows, p.hidden, [&](int64_t r, float* buf) {
    row_kernel_cpu<T, W, PROD, SCHEME, VAR>(p, r, buf, nw);
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
    float local = 0.f;
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < p.rows; ++r) {
      const T* x = static_cast<const T*>(p.x) + r * p.x_stride;
      local = vx_max_nan(local, absmax(FromInput<T>{x}, 0, p.hidden));
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
