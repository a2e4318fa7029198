// Scalar conversions shared by device code and a host-side test build (plain C++):
// bf16, fp8 e4m3fn / e4m3fnuz and int8, all round-to-nearest-even like torch.
// fp8 is converted in software so CUDA and HIP (ROCm 5.x has no fp8 header) agree bit for bit.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef VX_HD
#if defined(__CUDACC__) || defined(__HIPCC__)
#define VX_HD __host__ __device__ __forceinline__
#else
#define VX_HD inline
#endif
#endif

VX_HD uint32_t vx_f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

VX_HD float vx_u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

VX_HD float vx_bf16_to_float(uint16_t b) { return vx_u2f(static_cast<uint32_t>(b) << 16); }

VX_HD uint16_t vx_float_to_bf16(float f) {
  uint32_t u = vx_f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// float -> e4m3 with round-to-nearest-even. FNUZ (gfx94x): bias 8, max 240 (code 0x7f), NaN 0x80,
// no negative zero. FN: bias 7, max 448 (code 0x7e), NaN 0x7f. Out-of-range values saturate
// (callers clamp to FMAX first, as the contract does, so this never triggers there).
template <bool FNUZ>
VX_HD uint8_t vx_float_to_e4m3(float f) {
  const uint32_t u = vx_f2u(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return FNUZ ? 0x80u : static_cast<uint8_t>(sign | 0x7fu);
  const int bias = FNUZ ? 8 : 7;
  const uint32_t max_code = FNUZ ? 0x7fu : 0x7eu;
  uint32_t code;
  if (a < static_cast<uint32_t>(127 + 1 - bias) << 23) {
    // Below the smallest normal: a multiple of the subnormal step 2^(-bias-2); the
    // scaling is exact and rintf rounds half to even. Code 8 is the smallest normal.
    code = static_cast<uint32_t>(rintf(vx_u2f(a) * static_cast<float>(1 << (bias + 2))));
  } else {
    const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);  // RNE to 3 mantissa bits
    const uint32_t e = (r >> 23) - 127u + static_cast<uint32_t>(bias);
    code = e > 15u ? max_code + 1u : (e << 3) | ((r >> 20) & 7u);
    if (code > max_code) code = max_code;
  }
  if (FNUZ && code == 0) return 0;
  return static_cast<uint8_t>(sign | code);
}

// max / min keeping NaN, as torch's amax, maximum, minimum and clamp do (fmaxf and fminf
// return the other operand): a NaN input must give NaN scales and values, never finite ones.
VX_HD float vx_max_nan(float a, float b) { return (a != a || a > b) ? a : b; }
VX_HD float vx_min_nan(float a, float b) { return (a != a || a < b) ? a : b; }

VX_HD int8_t vx_float_to_int8(float v) {
  float r = rintf(v);  // half to even under the default rounding mode
  if (r != r) return 0;  // NaN: torch's conversion gives 0 (a C++ cast would be undefined)
  r = fminf(fmaxf(r, -128.0f), 127.0f);
  return static_cast<int8_t>(r);
}
