// The vector layer of vx_cpu.cpp: 16 f32 lanes (V), 16 i32 lanes (VI), a per-lane predicate
// (Pred), a row tail (Tail: the first n lanes of a load or store), 16 16-bit codes in an
// __m256i and 16 8-bit codes in an __m128i, on whichever of two instruction sets the
// compiler targets (-march=native):
// - AVX-512 F/BW/VL/DQ: one register per vector, the mask registers for predicates and tails;
// - AVX2 + FMA + F16C: two __m256 halves (lanes 0-7, 8-15), all-ones lanes for predicates, a
//   lane count for tails (a full vector loads and stores directly, a tail through a zeroed
//   stack buffer, as a masked load zeroes the lanes it skips).
// Every operation gives the same bits on both: the AVX2 side emulates the AVX-512 ones it
// lacks exactly (scalef in vexp's domain, fpclass, the truncating narrowings, unsigned
// compares), and the reductions sum in the same fixed tree.
#pragma once
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

namespace vx::vec {

constexpr int L = 16;  // f32 lanes of a vector

// hsum's order on either ISA (that of GCC's _mm512_reduce_add_ps): the two 8-lane halves
// added lane by lane, then 4 + 4, then lanes 0 + 2 and 1 + 3, then those two.
inline float hsum8(__m256 t) {
  __m128 a = _mm_add_ps(_mm256_extractf128_ps(t, 1), _mm256_castps256_ps128(t));
  a = _mm_add_ps(a, _mm_movehl_ps(a, a));
  return _mm_cvtss_f32(_mm_add_ss(a, _mm_movehdup_ps(a)));
}

constexpr int kToNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)

#define VX_VEC_INLINE

using V = __m512;
using VI = __m512i;
using Pred = __mmask16;
using Tail = __mmask16;

constexpr Tail kAll = 0xffff;
inline Tail lanes(int64_t n) { return n >= L ? kAll : static_cast<Tail>((1u << n) - 1u); }

inline V vset1(float a) { return _mm512_set1_ps(a); }
inline V vzero() { return _mm512_setzero_ps(); }
inline VI iset1(int a) { return _mm512_set1_epi32(a); }
inline VI izero() { return _mm512_setzero_si512(); }
inline VI bits(V a) { return _mm512_castps_si512(a); }
inline V floats(VI a) { return _mm512_castsi512_ps(a); }

// Masked only in a row's tail: a plain load or store where every lane is in.
inline V load_f32(const float* p, Tail t) {
  return t == kAll ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(t, p);
}
inline void store_f32(float* p, Tail t, V a) {
  if (t == kAll) _mm512_storeu_ps(p, a);
  else _mm512_mask_storeu_ps(p, t, a);
}
inline __m256i load_u16(const void* p, Tail t) {
  return t == kAll ? _mm256_loadu_si256(static_cast<const __m256i*>(p))
                   : _mm256_maskz_loadu_epi16(t, p);
}
inline void store_u16(void* p, Tail t, __m256i c) {
  if (t == kAll) _mm256_storeu_si256(static_cast<__m256i*>(p), c);
  else _mm256_mask_storeu_epi16(p, t, c);
}
inline void store_u8(void* p, Tail t, __m128i c) {
  if (t == kAll) _mm_storeu_si128(static_cast<__m128i*>(p), c);
  else _mm_mask_storeu_epi8(p, t, c);
}

inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
inline V vsub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V vmul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V vdiv(V a, V b) { return _mm512_div_ps(a, b); }
// min / max return b where either is NaN (the instructions' rule, on both ISAs).
inline V vmin(V a, V b) { return _mm512_min_ps(a, b); }
inline V vmax(V a, V b) { return _mm512_max_ps(a, b); }
inline V vfmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c
inline V vfnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a * b
inline V vrint(V a) { return _mm512_roundscale_ps(a, kToNearest); }  // to nearest even
inline V vscalef(V p, V n) { return _mm512_scalef_ps(p, n); }  // p * 2^n, n integral
inline VI vcvt_i32(V a) { return _mm512_cvtps_epi32(a); }  // the current (nearest) rounding
inline V maskz(Tail t, V a) { return _mm512_maskz_mov_ps(t, a); }  // 0 past the tail
inline V vselect(Pred p, V a, V b) { return _mm512_mask_mov_ps(b, p, a); }  // p ? a : b
inline Pred is_nan(V a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
inline V zero_nan(V a) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), a); }
inline Pred is_special(V a) { return _mm512_fpclass_ps_mask(a, 0x9f); }  // NaN, inf or ±0
inline Pred pnone() { return 0; }
inline Pred por(Pred a, Pred b) { return a | b; }
inline bool any_lane(Pred p) { return p != 0; }
inline float hsum(V a) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
  return hsum8(_mm256_add_ps(hi, _mm512_castps512_ps256(a)));
}
inline float hmax(V a) { return _mm512_reduce_max_ps(a); }

inline VI vadd(VI a, VI b) { return _mm512_add_epi32(a, b); }
inline VI vsub(VI a, VI b) { return _mm512_sub_epi32(a, b); }
inline VI vand(VI a, VI b) { return _mm512_and_si512(a, b); }
inline VI vor(VI a, VI b) { return _mm512_or_si512(a, b); }
template <int K> VI vsrli(VI a) { return _mm512_srli_epi32(a, K); }
template <int K> VI vslli(VI a) { return _mm512_slli_epi32(a, K); }
inline VI vmin_u32(VI a, VI b) { return _mm512_min_epu32(a, b); }
inline Pred vcmpgt_u32(VI a, VI b) { return _mm512_cmpgt_epu32_mask(a, b); }
inline Pred vcmplt_u32(VI a, VI b) { return _mm512_cmplt_epu32_mask(a, b); }
inline Pred vcmpeq(VI a, VI b) { return _mm512_cmpeq_epi32_mask(a, b); }
inline VI vselect(Pred p, VI a, VI b) { return _mm512_mask_mov_epi32(b, p, a); }

// Lanes that fit in 16 / 8 bits, unsigned (codes), narrowed; lanes saturated to int8;
// 16-bit codes zero-extended.
inline __m256i narrow16(VI a) { return _mm512_cvtepi32_epi16(a); }
inline __m128i narrow8(VI a) { return _mm512_cvtepi32_epi8(a); }
inline __m128i narrow8_sat(VI a) { return _mm512_cvtsepi32_epi8(a); }
inline VI widen16(__m256i c) { return _mm512_cvtepu16_epi32(c); }
inline __m256i f16_codes(V a) { return _mm512_cvtps_ph(a, kToNearest); }
inline V from_f16(__m256i c) { return _mm512_cvtph_ps(c); }

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

// Vectors of two registers cross a function call through memory (the x86-64 ABI passes
// aggregates over 16 bytes so): vx_cpu.cpp's helpers taking or giving one are inlined.
#define VX_VEC_INLINE inline __attribute__((always_inline))

struct V { __m256 lo, hi; };
struct VI { __m256i lo, hi; };
struct Pred { __m256 lo, hi; };
struct Tail { int n; };

constexpr Tail kAll = {L};
inline Tail lanes(int64_t n) { return {n >= L ? L : static_cast<int>(n)}; }

inline V vset1(float a) { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }
inline V vzero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline VI iset1(int a) { return {_mm256_set1_epi32(a), _mm256_set1_epi32(a)}; }
inline VI izero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
inline VI bits(V a) { return {_mm256_castps_si256(a.lo), _mm256_castps_si256(a.hi)}; }
inline V floats(VI a) { return {_mm256_castsi256_ps(a.lo), _mm256_castsi256_ps(a.hi)}; }

inline V load_f32(const float* p, Tail t) {
  if (t.n == L) return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
  alignas(32) float b[L] = {};
  memcpy(b, p, t.n * sizeof(float));
  return {_mm256_load_ps(b), _mm256_load_ps(b + 8)};
}
inline void store_f32(float* p, Tail t, V a) {
  alignas(32) float b[L];
  float* d = t.n == L ? p : b;
  _mm256_storeu_ps(d, a.lo);
  _mm256_storeu_ps(d + 8, a.hi);
  if (t.n < L) memcpy(p, b, t.n * sizeof(float));
}
inline __m256i load_u16(const void* p, Tail t) {
  if (t.n == L) return _mm256_loadu_si256(static_cast<const __m256i*>(p));
  alignas(32) uint16_t b[L] = {};
  memcpy(b, p, t.n * sizeof(uint16_t));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
}
inline void store_u16(void* p, Tail t, __m256i c) {
  if (t.n == L) return _mm256_storeu_si256(static_cast<__m256i*>(p), c);
  alignas(32) uint16_t b[L];
  _mm256_store_si256(reinterpret_cast<__m256i*>(b), c);
  memcpy(p, b, t.n * sizeof(uint16_t));
}
inline void store_u8(void* p, Tail t, __m128i c) {
  if (t.n == L) return _mm_storeu_si128(static_cast<__m128i*>(p), c);
  alignas(16) uint8_t b[L];
  _mm_store_si128(reinterpret_cast<__m128i*>(b), c);
  memcpy(p, b, t.n);
}

inline V vadd(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline V vsub(V a, V b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline V vmul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline V vdiv(V a, V b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
inline V vmin(V a, V b) { return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
inline V vmax(V a, V b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
inline V vfmadd(V a, V b, V c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline V vfnmadd(V a, V b, V c) {
  return {_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}
inline V vrint(V a) {
  return {_mm256_round_ps(a.lo, kToNearest), _mm256_round_ps(a.hi, kToNearest)};
}
inline VI vcvt_i32(V a) { return {_mm256_cvtps_epi32(a.lo), _mm256_cvtps_epi32(a.hi)}; }
inline V vselect(Pred p, V a, V b) {
  return {_mm256_blendv_ps(b.lo, a.lo, p.lo), _mm256_blendv_ps(b.hi, a.hi, p.hi)};
}
inline V maskz(Tail t, V a) {
  const __m256i n = _mm256_set1_epi32(t.n);
  const __m256i lo = _mm256_cmpgt_epi32(n, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i hi = _mm256_cmpgt_epi32(n, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15));
  return {_mm256_and_ps(a.lo, _mm256_castsi256_ps(lo)),
          _mm256_and_ps(a.hi, _mm256_castsi256_ps(hi))};
}
inline Pred is_nan(V a) {
  return {_mm256_cmp_ps(a.lo, a.lo, _CMP_UNORD_Q), _mm256_cmp_ps(a.hi, a.hi, _CMP_UNORD_Q)};
}
inline V zero_nan(V a) {
  return {_mm256_and_ps(a.lo, _mm256_cmp_ps(a.lo, a.lo, _CMP_ORD_Q)),
          _mm256_and_ps(a.hi, _mm256_cmp_ps(a.hi, a.hi, _CMP_ORD_Q))};
}
inline Pred pnone() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline Pred por(Pred a, Pred b) { return {_mm256_or_ps(a.lo, b.lo), _mm256_or_ps(a.hi, b.hi)}; }
inline bool any_lane(Pred p) { return _mm256_movemask_ps(_mm256_or_ps(p.lo, p.hi)) != 0; }
inline float hsum(V a) { return hsum8(_mm256_add_ps(a.hi, a.lo)); }
inline float hmax(V a) {
  const __m256 t = _mm256_max_ps(a.hi, a.lo);
  __m128 m = _mm_max_ps(_mm256_extractf128_ps(t, 1), _mm256_castps256_ps128(t));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

inline VI vadd(VI a, VI b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
inline VI vsub(VI a, VI b) { return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)}; }
inline VI vand(VI a, VI b) { return {_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)}; }
inline VI vor(VI a, VI b) { return {_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)}; }
template <int K> VI vsrli(VI a) { return {_mm256_srli_epi32(a.lo, K), _mm256_srli_epi32(a.hi, K)}; }
template <int K> VI vslli(VI a) { return {_mm256_slli_epi32(a.lo, K), _mm256_slli_epi32(a.hi, K)}; }
inline VI vmin_u32(VI a, VI b) {
  return {_mm256_min_epu32(a.lo, b.lo), _mm256_min_epu32(a.hi, b.hi)};
}
inline Pred vcmpeq(VI a, VI b) {
  return {_mm256_castsi256_ps(_mm256_cmpeq_epi32(a.lo, b.lo)),
          _mm256_castsi256_ps(_mm256_cmpeq_epi32(a.hi, b.hi))};
}
// Unsigned a > b: the signed compare with both sign bits flipped.
inline Pred vcmpgt_u32(VI a, VI b) {
  const __m256i s = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const auto gt = [&](__m256i x, __m256i y) {
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_xor_si256(x, s), _mm256_xor_si256(y, s)));
  };
  return {gt(a.lo, b.lo), gt(a.hi, b.hi)};
}
inline Pred vcmplt_u32(VI a, VI b) { return vcmpgt_u32(b, a); }
inline VI vselect(Pred p, VI a, VI b) { return bits(vselect(p, floats(a), floats(b))); }

// fpclass 0x9f: |a| is 0, or at least inf's bits (inf or NaN).
inline Pred is_special(V a) {
  const VI m = vand(bits(a), iset1(0x7fffffff));
  const Pred big = {_mm256_castsi256_ps(_mm256_cmpgt_epi32(m.lo, _mm256_set1_epi32(0x7f7fffff))),
                    _mm256_castsi256_ps(_mm256_cmpgt_epi32(m.hi, _mm256_set1_epi32(0x7f7fffff)))};
  return por(big, vcmpeq(m, izero()));
}

// scalef for what vexp passes (n integral, |n| <= 250, p in [0.5, 2)): with k = floor(n / 2),
// p * 2^(n - k) is exact, so the product with 2^k is the one rounding scalef makes, to a
// denormal, 0 or inf alike. The asm keeps that product a rounding of its own: g++ contracts
// a following add (vexp's caller adds 1) into an fma otherwise.
inline V vscalef(V p, V n) {
  const VI k = vcvt_i32(n);
  const VI k1 = {_mm256_srai_epi32(k.lo, 1), _mm256_srai_epi32(k.hi, 1)};
  const auto pow2 = [](VI e) { return floats(vslli<23>(vadd(e, iset1(127)))); };
  V r = vmul(vmul(p, pow2(vsub(k, k1))), pow2(k1));
  asm("" : "+x"(r.lo), "+x"(r.hi));
  return r;
}

// Lanes that fit in 16 / 8 bits, unsigned (codes), narrowed by the saturating packs, which
// keep them as they are; lanes saturated to int8 (the signed packs); 16-bit codes
// zero-extended. A 256-bit pack interleaves its sources by 128-bit lane: the permute puts
// the halves back in order.
inline __m256i narrow16(VI a) {
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a.lo, a.hi), 0xd8);
}
inline __m128i narrow8(VI a) {
  const __m256i w = narrow16(a);
  return _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}
inline __m128i narrow8_sat(VI a) {
  const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a.lo, a.hi), 0xd8);
  return _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}
inline VI widen16(__m256i c) {
  return {_mm256_cvtepu16_epi32(_mm256_castsi256_si128(c)),
          _mm256_cvtepu16_epi32(_mm256_extracti128_si256(c, 1))};
}
inline __m256i f16_codes(V a) {
  return _mm256_setr_m128i(_mm256_cvtps_ph(a.lo, kToNearest), _mm256_cvtps_ph(a.hi, kToNearest));
}
inline V from_f16(__m256i c) {
  return {_mm256_cvtph_ps(_mm256_castsi256_si128(c)),
          _mm256_cvtph_ps(_mm256_extracti128_si256(c, 1))};
}

#else
#error "the cpu kernels need AVX2, FMA and F16C (or AVX-512 F, BW, VL, DQ): -march=native"
#endif

}  // namespace vx::vec
