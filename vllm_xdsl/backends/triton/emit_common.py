"""Pieces shared by the three kernel templates: rounding helpers and the quant epilogue.

Every kernel computes in f32 and rounds explicitly, in f32, at each rounding point of the
native contract (OPS.md). The roundings are exact on the GPU and also in Triton's CPU
interpreter, whose f32->bf16 and f32->fp8 casts are wrong; the final cast to the stored
dtype then only ever sees values already on its grid. A `hw_casts` spec rounds to bf16 and
e4m3fn with the GPU's conversion instructions instead (launch.uses_hw_casts decides).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from vllm_xdsl.core.dtypes import DType
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.ops.dtypes import to_torch

# f32 helpers, emitted only into sources that call them.
HELPERS: dict[str, str] = {
    "_round_bf16": """
@triton.jit
def _round_bf16(x):
    # f32 -> nearest-even bf16, kept in f32 (NaN passes through).
    b = x.to(tl.uint32, bitcast=True)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return tl.where(x != x, x, b.to(tl.float32, bitcast=True))
""",
    "_max_nan": """
@triton.jit
def _max_nan(a, b):
    # max keeping NaN, as torch's amax, clamp and maximum do (tl.maximum and tl.max drop it
    # on a GPU): a NaN input must give NaN scales and values, never finite ones.
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
""",
    "_rint": """
@triton.jit
def _rint(x):
    # Round half to even for |x| < 2**22: adding 1.5 * 2**23 leaves no fraction bits, so the
    # f32 add rounds to nearest even; subtracting it back is exact.
    return (x + 12582912.0) - 12582912.0
""",
    "_e4m3_encode": """
@triton.jit
def _e4m3_encode(q, MIN_EXP: tl.constexpr, SUB_STEPS: tl.constexpr, MIN_NORMAL: tl.constexpr,
                 NEG_ZERO: tl.constexpr):
    # The e4m3 bits of f32 q (|q| <= FMAX, or NaN) rounded to nearest even, from its f32
    # bits: no f32->fp8 cast (the interpreter's is wrong; pre-Ada GPUs lack one). Stored
    # through a uint8 view of the output.
    a = tl.abs(q)
    b = a.to(tl.uint32, bitcast=True)
    # Normals: round the f32 bits to 3 mantissa bits (a carry moves into the exponent),
    # then rebias the exponent. A NaN's bits come out above every finite code: the minimum
    # makes them the NaN code (0x7F in e4m3fn; 0x80, "-0", in e4m3fnuz).
    normal = ((b + 0x7FFFF + ((b >> 20) & 1)) >> 20) - ((126 + MIN_EXP) << 3)
    normal = tl.minimum(normal, 0x7F if NEG_ZERO else 0x80)
    # Subnormals: the count of 2**(MIN_EXP-3) steps. Adding 1.5 * 2**23 rounds it to the
    # nearest even integer and leaves it in the low bits; a count of 8 is the smallest
    # normal's encoding, so rounding up into the normals just works.
    sub = (a * SUB_STEPS + 12582912.0).to(tl.uint32, bitcast=True) & 0xF
    bits = tl.where(a < MIN_NORMAL, sub, normal)  # NaN: not below, so the normal path
    sign = (q.to(tl.uint32, bitcast=True) >> 24) & 0x80
    if NEG_ZERO:  # e4m3fn has -0, as torch makes it
        bits = bits | sign
    else:  # e4m3fnuz: 0x80 is NaN, zero is +0
        bits = tl.where(bits != 0, bits | sign, bits)
    return bits.to(tl.uint8)
""",
    "_div_rn_by": """
@triton.jit
def _div_rn_by(y, d, inv):
    # y / d rounded to nearest even without a division per element, given inv = div_rn(1, d),
    # for d in [2**-64, 2**64] and 2**-20 <= |y / d| <= 2**10 (no overflow or underflow on
    # the way); a smaller quotient comes out as tiny as it is, and every quant rounds it to 0.
    # Markstein: if inv is within half an ulp of 1/d and q within one ulp of y/d, then
    # r = y - d*q is exact and q + r*inv rounds to y/d. q = y*inv may be 1.5 ulps off, so
    # one correction first brings it within an ulp. Each fma rounds once, on the GPU and in
    # the interpreter alike. The residual is taken as d*q - y and subtracted, so that
    # y = -0 gives -0 (as torch's division does; the negations are free operand flags).
    q = y * inv
    q = tl.fma(-tl.fma(d, q, -y), inv, q)
    return tl.fma(-tl.fma(d, q, -y), inv, q)
""",
    "_pow2_ceil": """
@triton.jit
def _pow2_ceil(s):
    # 2**ceil(log2(s)) for a positive normal f32, exactly, from the bits (ue8m0 scales);
    # inf stays inf and NaN NaN.
    b = s.to(tl.uint32, bitcast=True)
    e = (b >> 23) & 0xFF
    e = tl.where((b & 0x7FFFFF) != 0, e + 1, e)
    return tl.where(s != s, s, (e << 23).to(tl.float32, bitcast=True))
""",
}

TL_DTYPE = {
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float32: "tl.float32",
    torch.float8_e4m3fn: "tl.float8e4nv",
    torch.float8_e4m3fnuz: "tl.float8e4b8",
    torch.int8: "tl.int8",
}
# fp8 types whose conversion from f32 `hw_casts` leaves to the GPU: e4m3fn, converted by
# sm_89+ with cvt.rn.satfinite (round to nearest even). e4m3fnuz (ROCm) keeps the f32 path.
HW_FP8 = (torch.float8_e4m3fn,)
# Exponent of the smallest normal e4m3 number (bias 7 for fn, 8 for fnuz).
E4M3_MIN_EXP = {torch.float8_e4m3fn: -6, torch.float8_e4m3fnuz: -7}


def round_to(expr: str, dtype: torch.dtype, hw: bool = False) -> str:
    """An f32 expression rounded (nearest even) to `dtype`, still as f32. `hw`: with the
    GPU's conversion instruction (exact on a GPU, wrong in the interpreter) instead of the
    bit arithmetic of _round_bf16."""
    if dtype == torch.bfloat16:
        return f"({expr}).to(tl.bfloat16).to(tl.float32)" if hw else f"_round_bf16({expr})"
    if dtype == torch.float16:
        return f"({expr}).to(tl.float16).to(tl.float32)"  # exact, even when interpreted
    return expr


KEEP_NAN = "propagate_nan=tl.PropagateNan.ALL"


def clamp(expr: str, lo: str, hi: str) -> str:
    """`expr` clamped to [lo, hi], NaN kept (torch.clamp's NaN is NaN)."""
    return f"tl.clamp({expr}, {lo}, {hi}, {KEEP_NAN})"


def absmax(expr: str, axis: int) -> str:
    """The largest |expr| along `axis`, NaN if any element is NaN (as torch.amax)."""
    return f"tl.reduce(tl.abs({expr}), {axis}, _max_nan)"


def flt(v: float) -> str:
    """A float literal that round-trips (Triton rounds it to f32 like torch does)."""
    return repr(float(v))


@dataclass
class KernelText:
    """A kernel being assembled: parameters and body lines (indented by 4)."""

    name: str
    params: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)

    def add(self, *lines: str) -> None:
        self.body.extend(lines)

    def render(self) -> str:
        params = "".join(f"    {p},\n" for p in self.params)
        body = "\n".join(f"    {line}" if line else "" for line in self.body)
        return f"@triton.jit\ndef {self.name}(\n{params}):\n{body}\n"


def scheme_text(s: QuantScheme) -> str:
    """A short readable description of a scheme, for comments."""
    kind = "static" if s.static else "dynamic"
    where = {"tensor": "per tensor", "token": "per token", "group": f"per group of {s.group_size}"}
    text = f"{str(s.dtype).removeprefix('torch.')}, {kind} {where[s.granularity]}"
    if not s.variant.is_default:
        text += f", variant {s.variant.spelling()!r}"
    if s.granularity == "group":
        text += ", column-major scales" if s.column_major_scales else ", row-major scales"
        text += ", ue8m0" if s.use_ue8m0 else ""
        text += f", eps {s.group_eps!r}"
    return text


def quant_params(scheme: QuantScheme, has_scale_ub: bool, fused: bool,
                 zero_point: str | None = None) -> list[str]:
    """Kernel parameters of the quant epilogue (after q_ptr, q_row_stride)."""
    zp = {None: [], "tensor": ["zp_ptr"], "token": ["zp_ptr", "zp_row_stride"],
          "group": ["zp_ptr", "zp_row_stride", "zp_group_stride"]}[zero_point]
    return _scale_params(scheme, has_scale_ub, fused) + zp


def _scale_params(scheme: QuantScheme, has_scale_ub: bool, fused: bool) -> list[str]:
    if scheme.static:
        return ["scale_ptr", "scales_ptr"] if fused else ["scale_ptr"]
    if scheme.granularity == "tensor":
        return ["amax_ptr", "scales_ptr"]
    if scheme.granularity == "token":
        return ["scales_ptr", "scale_ub_ptr"] if has_scale_ub else ["scales_ptr"]
    return ["scales_ptr", "scales_row_stride", "scales_group_stride"]


# Scales for which _div_rn_by is exact; beyond them a quant divides element by element
# (bench/kernel_instructions.py drops that branch to count the usual path).
_FAST_DIVISORS = (flt(2.0**-64), flt(2.0**64))
FALLBACK_DIVISION = "else:  # a scale this far out: divide each element"


def _divide(k: KernelText, d: str, bound: float | None, groups: bool = False) -> None:
    """q = y / d, IEEE-rounded, with one division per row (per group) instead of one per
    element. `bound`: clamp y to +-bound * d first, when |y / d| may exceed 2**10 (a static
    or upper-bounded scale); the quant saturates below that anyway. `groups`: d holds one
    scale per group (a [groups] vector, broadcast over each group's columns)."""
    lo, hi = _FAST_DIVISORS
    # Per group: the reciprocals are computed on the [groups] vector, then broadcast.
    per, inv = (f"{d}[:, None]", "inv[:, None]") if groups else (d, "inv")
    if groups:
        fits = f"(tl.min({d}, axis=0) >= {lo}) & (tl.max({d}, axis=0) <= {hi})"
    else:
        fits = f"({d} >= {lo}) & ({d} <= {hi})"
    k.add(f"if {fits}:", f"    inv = tl.div_rn(1.0, {d})")
    num = "y"
    if bound is not None:
        k.add(f"    limit = {per} * {flt(bound)}", f"    yc = {clamp('y', '-limit', 'limit')}")
        num = "yc"
    k.add(
        f"    q = _div_rn_by({num}, {per}, {inv})",
        FALLBACK_DIVISION,
        f"    q = tl.div_rn(y, {per})",
    )


def _scale_variant(scheme: QuantScheme) -> bool:
    """A dynamic scale computed otherwise than the OPS.md row (scale dtype, floor, range)."""
    v = scheme.variant
    return bool(v.floor or v.scale_range or v.scale_dtype != DType.F32)


def _variant_scale(k: KernelText, scheme: QuantScheme, amax: str, hw: bool) -> None:
    """`scale` as natives_variant.dynamic_scale computes it from the absmax (per tensor and
    per token: a scalar; per group: a [groups] vector)."""
    v = scheme.variant
    if scheme.granularity == "group" and not v.floor:
        amax = f"_max_nan({amax}, {flt(scheme.group_eps)})"
    divided = f"tl.div_rn({amax}, {flt(v.scale_range or scheme.qmax)})"
    k.add(f"scale = {round_to(divided, to_torch(v.scale_dtype), hw)}")
    if scheme.use_ue8m0:
        k.add("scale = _pow2_ceil(scale)")
    row_fp8 = scheme.is_fp8 and scheme.granularity != "group"  # tensor or token
    if v.floor == "min_scale" or (not v.floor and row_fp8):
        k.add(f"scale = _max_nan(scale, {flt(1.0 / (scheme.qmax * 512))})")
    elif v.floor == "zero_eps":
        eps = torch.tensor(v.floor_eps, dtype=to_torch(v.scale_dtype)).item()  # eps as sd holds it
        k.add(f"scale = tl.where(scale == 0.0, {flt(eps)}, scale)")
    k.add(f"scale = {round_to('scale', to_torch(v.scale_dtype), hw)}")


def quant_epilogue(
    k: KernelText,
    scheme: QuantScheme,
    has_scale_ub: bool,
    fused: bool,
    n: str,
    tiled: bool = False,
    hw: bool = False,
    zero_point: str | None = None,
) -> None:
    """Quantize `y` (f32, values exact in the activation dtype) and store q.

    `y` is [BLOCK], or [BLOCK // group_size, group_size] for per-group schemes.

    The structure follows the native quant ops: a NaN input gives NaN values and scales
    where torch's do (reductions, max and clamp keep NaN); scale computations and divisions
    are IEEE-rounded as in torch (`_div_rn_by` divides a row by its scale exactly without one
    division per element); `n` is the number of valid columns. `hw`: e4m3fn values are
    converted by the GPU's instruction (round to nearest even, one instruction per two
    values) instead of rounded and encoded in integer arithmetic.
    """
    qmax = flt(scheme.qmax)
    saturate = 2.0 * scheme.qmax  # a clamp of y to this many scales keeps q saturated
    k.add(f"# quantize: {scheme_text(scheme)}")
    if scheme.static or scheme.granularity == "tensor":
        if scheme.static:
            k.add("scale = tl.load(scale_ptr).to(tl.float32)")
            if fused:  # the fused op returns the static scale as f32 [1]
                first = "(row == 0) & (tile == 0)" if tiled else "row == 0"
                k.add(f"if {first}:", "    tl.store(scales_ptr, scale)")
        elif _scale_variant(scheme):  # the variant's scale, once from the global absmax
            k.add(
                "# amax_ptr holds the absmax's f32 bits (see the absmax kernel)",
                "amax = tl.load(amax_ptr).to(tl.float32, bitcast=True)",
            )
            _variant_scale(k, scheme, "amax", hw)
            k.add("if row == 0:", "    tl.store(scales_ptr, scale)")
        else:  # dynamic per tensor: the global absmax came from the absmax kernel
            k.add(
                "# amax_ptr holds the absmax's f32 bits (see the absmax kernel)",
                f"scale = _max_nan(tl.div_rn(tl.load(amax_ptr).to(tl.float32, bitcast=True), "
                f"{qmax}), {flt(1.0 / (scheme.qmax * 512))})",
                "if row == 0:",
                "    tl.store(scales_ptr, scale)",
            )
        if scheme.scaling == "recip":
            k.add("q = y * tl.div_rn(1.0, scale)")
        else:
            # A range above FMAX lets |y / scale| pass 2**10, beyond _div_rn_by's domain:
            # clamp y first (q saturates at FMAX anyway).
            wide = scheme.variant.scale_range > scheme.qmax
            _divide(k, "scale", saturate if scheme.static or wide else None)
    elif scheme.granularity == "token" and _scale_variant(scheme):
        k.add(f"amax = {absmax('y', 0)}")
        if has_scale_ub:
            k.add("amax = tl.minimum(amax, tl.load(scale_ub_ptr).to(tl.float32), "
                  f"{KEEP_NAN})")
        _variant_scale(k, scheme, "amax", hw)
        k.add("tl.store(scales_ptr + row, scale)")
        d = "scale"
        if scheme.dtype == torch.int8 and not scheme.variant.floor:
            k.add("divisor = tl.where(scale == 0.0, 1.0, scale)")  # a zero row: q = 0
            d = "divisor"
        if scheme.scaling == "recip":
            k.add(f"q = y * tl.div_rn(1.0, {d})")
        else:
            _divide(k, d, saturate if has_scale_ub else None)
    elif scheme.granularity == "token":
        k.add(f"amax = {absmax('y', 0)}")
        if scheme.is_fp8:
            if has_scale_ub:
                k.add("amax = tl.minimum(amax, tl.load(scale_ub_ptr).to(tl.float32), "
                      f"{KEEP_NAN})")
            k.add(
                f"scale = _max_nan(tl.div_rn(amax, {qmax}), {flt(1.0 / (scheme.qmax * 512))})",
                "tl.store(scales_ptr + row, scale)",
            )
            # Without an upper bound |y| <= amax, so |y / scale| <= FMAX already.
            if scheme.scaling == "recip":
                k.add("q = y * tl.div_rn(1.0, scale)")
            else:
                _divide(k, "scale", saturate if has_scale_ub else None)
        else:  # an all-zero row has scale 0 and q 0: divide its zeros by 1, not 0
            k.add(
                f"scale = tl.div_rn(amax, {qmax})",
                "tl.store(scales_ptr + row, scale)",
                "divisor = tl.where(scale == 0.0, 1.0, scale)",
            )
            if scheme.scaling == "recip":
                k.add("q = y * tl.div_rn(1.0, divisor)")
            else:
                _divide(k, "divisor", None)
    else:
        g = scheme.group_size
        if _scale_variant(scheme):
            _variant_scale(k, scheme, absmax("y", 1), hw)
        else:
            k.add(
                f"scale = tl.div_rn(_max_nan({absmax('y', 1)}, {flt(scheme.group_eps)}), {qmax})"
            )
            if scheme.use_ue8m0:
                k.add("scale = _pow2_ceil(scale)")
        base = f"tile * (BLOCK // {g}) + " if tiled else ""
        k.add(
            f"groups = {base}tl.arange(0, BLOCK // {g})",
            "tl.store(scales_ptr + row * scales_row_stride + groups * scales_group_stride, "
            f"scale, mask=groups < {n} // {g})",
        )
        if scheme.scaling == "recip":
            k.add("q = y * tl.div_rn(1.0, scale)[:, None]")
        else:
            _divide(k, "scale", None, groups=True)  # scale >= a group's absmax / FMAX
    qd = to_torch(scheme.variant.quotient_dtype)
    if qd != torch.float32:  # the quotient variant: rounded before the clamp (OPS.md)
        k.add(f"q = {round_to('q', qd, hw)}")
    if zero_point == "group":  # one per group of this tile (`groups`), onto its columns
        at = "zp_ptr + row * zp_row_stride + groups * zp_group_stride"
        valid = f"groups < {n} // {scheme.group_size}"
        zp = round_to(f"tl.load({at}, mask={valid}).to(tl.float32)", qd, hw)
        k.add(f"zp = {zp}", f"q = {round_to('q + zp[:, None]', qd, hw)}")
    elif zero_point is not None:  # added in the quotient dtype, as zp.to(qd) holds it
        at = "zp_ptr" if zero_point == "tensor" else "zp_ptr + row * zp_row_stride"
        zp = round_to(f"tl.load({at}).to(tl.float32)", qd, hw)
        k.add(f"q = {round_to(f'q + {zp}', qd, hw)}")
    lo = "-128.0" if scheme.dtype == torch.int8 else f"-{qmax}"
    k.add(f"q = {clamp('q', lo, qmax)}")
    if scheme.is_fp8 and hw and scheme.dtype in HW_FP8:
        k.add(
            "# q_ptr is the fp8 output viewed as uint8: store the bits of the GPU's conversion",
            f"tl.store(q_ptr + row * q_row_stride + cols, q.to({TL_DTYPE[scheme.dtype]})"
            ".to(tl.uint8, bitcast=True), mask=mask)",
        )
    elif scheme.is_fp8:
        e = E4M3_MIN_EXP[scheme.dtype]
        neg_zero = scheme.dtype == torch.float8_e4m3fn
        k.add(
            "# q_ptr is the fp8 output viewed as uint8: store the e4m3 bits",
            f"tl.store(q_ptr + row * q_row_stride + cols, _e4m3_encode(q, {e}, "
            f"{flt(2.0 ** (3 - e))}, {flt(2.0**e)}, {neg_zero}), mask=mask)",
        )
    else:
        k.add(
            "q = _rint(q)", "tl.store(q_ptr + row * q_row_stride + cols, q.to(tl.int8), mask=mask)"
        )
