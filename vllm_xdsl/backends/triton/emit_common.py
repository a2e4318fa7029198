"""Pieces shared by the three kernel templates: rounding helpers and the quant epilogue.

Every kernel computes in f32 and rounds explicitly, in f32, at each rounding point of the
native contract (OPS.md). The roundings are exact on the GPU and also in Triton's CPU
interpreter, whose f32->bf16 and f32->fp8 casts are wrong; the final cast to the stored
dtype then only ever sees values already on its grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from vllm_xdsl.ops.scheme import QuantScheme

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
    "_rint": """
@triton.jit
def _rint(x):
    # Round half to even for |x| < 2**22: adding 1.5 * 2**23 leaves no fraction bits, so the
    # f32 add rounds to nearest even; subtracting it back is exact.
    return (x + 12582912.0) - 12582912.0
""",
    "_round_e4m3": """
@triton.jit
def _round_e4m3(x, MIN_EXP: tl.constexpr):
    # f32 (|x| <= FMAX) -> nearest-even e4m3 value, kept in f32: 3 mantissa bits, so the
    # grid step at binade e is 2**(e-3); below 2**MIN_EXP (subnormals) it is 2**(MIN_EXP-3).
    # Scaling by powers of two is exact, and a carry into the next binade just works.
    e = ((x.to(tl.uint32, bitcast=True) >> 23) & 0xFF).to(tl.int32) - 127
    e = tl.maximum(e, MIN_EXP)
    step = ((e + 124) << 23).to(tl.float32, bitcast=True)
    inv_step = ((130 - e) << 23).to(tl.float32, bitcast=True)
    return _rint(x * inv_step) * step
""",
    "_e4m3_bits": """
@triton.jit
def _e4m3_bits(v, MIN_EXP: tl.constexpr, SUB_STEPS: tl.constexpr, MIN_NORMAL: tl.constexpr):
    # The e4m3 bits of a value already on the e4m3 grid, stored through a uint8 view of q,
    # so no f32->fp8 cast is involved (the interpreter's is wrong; pre-Ada GPUs lack one).
    # Normals: exponent and top 3 mantissa bits straight from the f32 bits; subnormals:
    # the count of 2**(MIN_EXP-3) steps. Zero is +0 (0x80 is e4m3fnuz's NaN).
    a = tl.abs(v)
    b = a.to(tl.int32, bitcast=True)
    normal = (((b >> 23) - (126 + MIN_EXP)) << 3) | ((b >> 20) & 7)
    bits = tl.where(a >= MIN_NORMAL, normal, (a * SUB_STEPS).to(tl.int32))
    return tl.where((v < 0.0) & (bits != 0), bits | 0x80, bits).to(tl.uint8)
""",
    "_pow2_ceil": """
@triton.jit
def _pow2_ceil(s):
    # 2**ceil(log2(s)) for a positive normal f32, exactly, from the bits (ue8m0 scales).
    b = s.to(tl.uint32, bitcast=True)
    e = (b >> 23) & 0xFF
    e = tl.where((b & 0x7FFFFF) != 0, e + 1, e)
    return (e << 23).to(tl.float32, bitcast=True)
""",
}
# A helper that calls another one needs it emitted first.
HELPER_DEPS = {"_round_e4m3": ("_rint",)}

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
    if s.granularity == "group":
        text += ", column-major scales" if s.column_major_scales else ", row-major scales"
        text += ", ue8m0" if s.use_ue8m0 else ""
        text += f", eps {s.group_eps!r}"
    return text


def quant_params(scheme: QuantScheme, has_scale_ub: bool, fused: bool) -> list[str]:
    """Kernel parameters of the quant epilogue (after q_ptr, q_row_stride)."""
    if scheme.static:
        return ["scale_ptr", "scales_ptr"] if fused else ["scale_ptr"]
    if scheme.granularity == "tensor":
        return ["amax_ptr", "scales_ptr"]
    if scheme.granularity == "token":
        return ["scales_ptr", "scale_ub_ptr"] if has_scale_ub else ["scales_ptr"]
    return ["scales_ptr", "scales_row_stride", "scales_group_stride"]


def quant_epilogue(
    k: KernelText,
    scheme: QuantScheme,
    has_scale_ub: bool,
    fused: bool,
    n: str,
    tiled: bool = False,
    hw: bool = False,
) -> None:
    """Quantize `y` (f32, values exact in the activation dtype) and store q.

    `y` is [BLOCK], or [BLOCK // group_size, group_size] for per-group schemes.

    The structure follows the native quant ops: scale computations and divisions are
    IEEE-rounded (div_rn) as in torch; `n` is the number of valid columns. `hw`: e4m3fn
    values are converted by the GPU's instruction (round to nearest even, one instruction
    per two values) instead of rounded and encoded in f32/integer arithmetic.
    """
    qmax = flt(scheme.qmax)
    k.add(f"# quantize: {scheme_text(scheme)}")
    if scheme.static or scheme.granularity == "tensor":
        if scheme.static:
            k.add("scale = tl.load(scale_ptr).to(tl.float32)")
            if fused:  # the fused op returns the static scale as f32 [1]
                first = "(row == 0) & (tile == 0)" if tiled else "row == 0"
                k.add(f"if {first}:", "    tl.store(scales_ptr, scale)")
        else:  # dynamic per tensor: the global absmax came from the absmax kernel
            k.add(
                f"scale = tl.maximum(tl.div_rn(tl.load(amax_ptr), {qmax}), "
                f"{flt(1.0 / (scheme.qmax * 512))})",
                "if row == 0:",
                "    tl.store(scales_ptr, scale)",
            )
        if scheme.is_fp8:
            k.add("q = y * tl.div_rn(1.0, scale)")
        else:
            k.add("q = tl.div_rn(y, scale)")
    elif scheme.granularity == "token":
        k.add("amax = tl.max(tl.abs(y), axis=0)")
        if scheme.is_fp8:
            if has_scale_ub:
                k.add("amax = tl.minimum(amax, tl.load(scale_ub_ptr).to(tl.float32))")
            k.add(
                f"scale = tl.maximum(tl.div_rn(amax, {qmax}), {flt(1.0 / (scheme.qmax * 512))})",
                "tl.store(scales_ptr + row, scale)",
                "q = tl.div_rn(y, scale)",
            )
        else:  # an all-zero row has scale 0 and q 0: divide its zeros by 1, not 0
            k.add(
                f"scale = tl.div_rn(amax, {qmax})",
                "tl.store(scales_ptr + row, scale)",
                "q = tl.div_rn(y, tl.where(scale == 0.0, 1.0, scale))",
            )
    else:
        g = scheme.group_size
        k.add(
            f"scale = tl.div_rn(tl.maximum(tl.max(tl.abs(y), axis=1), {flt(scheme.group_eps)}), "
            f"{qmax})"
        )
        if scheme.use_ue8m0:
            k.add("scale = _pow2_ceil(scale)")
        base = f"tile * (BLOCK // {g}) + " if tiled else ""
        k.add(
            f"groups = {base}tl.arange(0, BLOCK // {g})",
            "tl.store(scales_ptr + row * scales_row_stride + groups * scales_group_stride, "
            f"scale, mask=groups < {n} // {g})",
            "q = tl.div_rn(y, scale[:, None])",
        )
    lo = "-128.0" if scheme.dtype == torch.int8 else f"-{qmax}"
    k.add(f"q = tl.minimum(tl.maximum(q, {lo}), {qmax})")
    if scheme.is_fp8 and hw and scheme.dtype in HW_FP8:
        k.add(
            "# q_ptr is the fp8 output viewed as uint8: store the bits of the GPU's conversion",
            f"tl.store(q_ptr + row * q_row_stride + cols, q.to({TL_DTYPE[scheme.dtype]})"
            ".to(tl.uint8, bitcast=True), mask=mask)",
        )
    elif scheme.is_fp8:
        e = E4M3_MIN_EXP[scheme.dtype]
        k.add(
            f"q = _round_e4m3(q, {e})",
            "# q_ptr is the fp8 output viewed as uint8: store the e4m3 bits",
            f"tl.store(q_ptr + row * q_row_stride + cols, _e4m3_bits(q, {e}, "
            f"{flt(2.0 ** (3 - e))}, {flt(2.0**e)}), mask=mask)",
        )
    else:
        k.add(
            "q = _rint(q)", "tl.store(q_ptr + row * q_row_stride + cols, q.to(tl.int8), mask=mask)"
        )
