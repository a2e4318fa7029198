"""The native provider's lowering: each semantic op as its elementary torch ops.

Each decomposition follows its native function in vllm_xdsl/ops (the contract) step by
step, with the same casts in the same order, the same reductions, multiply-by-reciprocal
where the native multiplies and division where it divides, so that evaluating the
`torch.call`s gives exactly the native's values (test/test_lower_dispatch_native.py
checks it bit for bit). Casts are `prims.convert_element_type` and clamps `aten.clamp`, as
Inductor expects; nothing here is opaque, so Inductor can fuse it after export. One
spelling differs from the native's: a bf16/f16 sum rounded to its dtype is torch's add in
that dtype, which computes it exactly so (fp32, one rounding).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from xdsl.ir import Operation, SSAValue

from vllm_xdsl.dialects.types import tensor_type
from vllm_xdsl.dialects.vllm import (
    ActAndMulOp,
    FusedQuantOp,
    NormOp,
    QuantOp,
    ResidualNormOp,
    RmsNormSignature,
    SemanticSignature,
    has_rounded_sum,
)
from vllm_xdsl.ops.activations import ACTIVATIONS, FUSED_ACT_OPS
from vllm_xdsl.ops.scheme import INT8_MAX, QuantScheme, fp8_max
from vllm_xdsl.transforms.dispatch_native_variant import quant_variant, scales_layout
from vllm_xdsl.transforms.dispatch_torch import TorchBuilder, meta

F32 = torch.float32
# `x[..., d:]` as AOTAutograd spells it: slice to the end, on the dim counted from 0, so
# that a lowered slice is the input graph's node and export reuses its fake value.
_INT64_MAX = 9223372036854775807


def _min_scale(fmax: float) -> float:
    return 1.0 / (fmax * 512.0)  # as natives._min_scale


# --- norms -------------------------------------------------------------------------------


def rms_norm_fp32(
    b: TorchBuilder,
    xf: SSAValue,
    weight: SSAValue | None,
    epsilon: float | SSAValue,
    variance_size: int | None,
    out_dtype: torch.dtype,
) -> SSAValue:
    """natives.rms_norm_fp32 on an fp32 value."""
    shape = meta(xf)[1]
    xv = xf
    if variance_size is not None:
        xv = b.call("aten::slice.Tensor", xf, len(shape) - 1, 0, variance_size,
                    shape=(*shape[:-1], variance_size))
    sq = b.call("aten::pow.Tensor_Scalar", xv, 2)
    var = b.call("aten::mean.dim", sq, [-1], True, shape=(*shape[:-1], 1))
    # A runtime epsilon (0-d f64 tensor or f64 scalar) adds like the float: f32 result.
    var_eps = b.call("aten::add.Tensor", var, epsilon, dtype=F32, shape=meta(var)[1])
    y = b.call("aten::mul.Tensor", xf, b.call("aten::rsqrt.default", var_eps))
    if weight is not None:
        y = b.call("aten::mul.Tensor", b.convert(y, meta(weight)[0]), weight)
    return b.convert(y, out_dtype)


def _epsilon(op: NormOp) -> float | SSAValue:
    return op.epsilon_arg()


def _variance_size(op: NormOp) -> int | None:
    v = op.variance_size if isinstance(op, RmsNormSignature) else None
    return None if v is None else v.value.data


def rms_norm(b: TorchBuilder, op: Operation) -> list[SSAValue]:
    assert isinstance(op, NormOp)
    x = op.x
    return [rms_norm_fp32(b, b.convert(x, F32), op.weight, _epsilon(op),
                          _variance_size(op), meta(x)[0])]


# Dtypes whose elementwise ops ATen and Inductor compute in fp32 and round once.
_FP32_OPMATH = (torch.bfloat16, torch.float16)


def fused_add_rms_norm(b: TorchBuilder, op: Operation) -> list[SSAValue]:
    assert isinstance(op, ResidualNormOp)
    x, r = op.x, op.residual
    dtype = meta(x)[0]
    if has_rounded_sum(op) and dtype in _FP32_OPMATH and meta(r)[0] == dtype:
        # (x.float() + r.float()).to(dtype) is torch's own add in that dtype, bit for bit:
        # one node, spelled as the input graph spells it (export then reuses its values).
        residual_out = b.call("aten::add.Tensor", x, r)
        s = b.convert(residual_out, F32)  # the norm reads residual_out (natives.py)
    else:
        s = b.call("aten::add.Tensor", b.convert(x, F32), b.convert(r, F32))
        residual_out = b.convert(s, dtype)
        if has_rounded_sum(op):
            s = b.convert(residual_out, F32)
        # Otherwise the norm sees the unrounded fp32 sum, not residual_out.
    out = rms_norm_fp32(b, s, op.weight, _epsilon(op), None, dtype)
    return [out, residual_out]


# --- the act-and-mul family (ops/activations.py) --------------------------------------------

_ACTIVATION_CALLS: dict[str, tuple[str, dict[str, object]]] = {
    "silu": ("aten::silu.default", {}),
    "gelu": ("aten::gelu.default", {}),
    "gelu_tanh": ("aten::gelu.default", {"approximate": "tanh"}),
}


def act_and_mul_value(b: TorchBuilder, op: Operation) -> SSAValue:
    """activations.act_and_mul: torch's activation of the gate, times up, in x's dtype."""
    assert isinstance(op, ActAndMulOp)
    x: SSAValue = op.x
    up = op.up
    if up is None:
        shape = meta(x)[1]
        h = shape[-1]
        if h is None:  # unknown hidden size: two equal halves
            half = tensor_type(meta(x)[0], (*shape[:-1], None))
            b.call("aten::chunk.default", x, 2, -1, results=[half, half])
            x, up = b.ops[-1].results
        else:
            d, last = h // 2, len(shape) - 1
            x, up = (b.call("aten::slice.Tensor", x, last, 0, d, shape=(*shape[:-1], d)),
                     b.call("aten::slice.Tensor", x, last, d, _INT64_MAX, shape=(*shape[:-1], d)))
    target, kwargs = _ACTIVATION_CALLS[op.ACTIVATION]
    return b.call("aten::mul.Tensor", b.call(target, x, kwargs=kwargs or None), up)


def act_and_mul(b: TorchBuilder, op: Operation) -> list[SSAValue]:
    return [act_and_mul_value(b, op)]


# --- quantization ------------------------------------------------------------------------


def static_fp8(b: TorchBuilder, x: SSAValue, scale: SSAValue, fp8: torch.dtype) -> SSAValue:
    fmax = fp8_max(fp8)
    inv = b.call("aten::reciprocal.default", b.convert(scale, F32))
    y = b.call("aten::mul.Tensor", b.convert(x, F32), inv)
    return b.convert(b.call("aten::clamp.default", y, -fmax, fmax), fp8)


def _absmax_rows(b: TorchBuilder, xf: SSAValue) -> SSAValue:
    shape = meta(xf)[1]
    return b.call("aten::amax.default", b.call("aten::abs.default", xf), [-1], True,
                  shape=(*shape[:-1], 1))


def _rows(b: TorchBuilder, s: SSAValue) -> SSAValue:
    """`s.reshape(-1, 1)`: per-token scales as [T, 1]."""
    shape = meta(s)[1]
    tokens: int | None = 1
    for d in shape[:-1]:
        tokens = None if d is None or tokens is None else tokens * d
    return b.call("aten::reshape.default", s, [-1, 1], shape=(tokens, 1))


def dynamic_fp8(b: TorchBuilder, x: SSAValue, fp8: torch.dtype) -> list[SSAValue]:
    fmax = fp8_max(fp8)
    absmax = b.call("aten::amax.default", b.call("aten::abs.default", b.convert(x, F32)),
                    [], False, shape=())
    absmax = b.call("aten::reshape.default", absmax, [1], shape=(1,))
    scale = b.call("aten::clamp.default", b.call("aten::div.Tensor", absmax, fmax),
                   _min_scale(fmax))
    return [static_fp8(b, x, scale, fp8), scale]


def per_token_fp8(
    b: TorchBuilder, x: SSAValue, scale_ub: SSAValue | None, fp8: torch.dtype
) -> list[SSAValue]:
    fmax = fp8_max(fp8)
    xf = b.convert(x, F32)
    a = _absmax_rows(b, xf)
    if scale_ub is not None:
        a = b.call("aten::minimum.default", a, b.convert(scale_ub, F32))
    s = b.call("aten::clamp.default", b.call("aten::div.Tensor", a, fmax), _min_scale(fmax))
    y = b.call("aten::clamp.default", b.call("aten::div.Tensor", xf, s), -fmax, fmax)
    return [b.convert(y, fp8), _rows(b, s)]


def per_group_fp8(b: TorchBuilder, x: SSAValue, scheme: QuantScheme) -> list[SSAValue]:
    fmax = fp8_max(scheme.dtype)
    shape = meta(x)[1]
    gs = scheme.group_size
    groups = None if shape[-1] is None else shape[-1] // gs
    # x.reshape(*x.shape[:-1], G, gs) without naming the leading dims (or G if unknown).
    xg = b.call("aten::unflatten.int", b.convert(x, F32), -1, [-1 if groups is None else groups, gs],
                shape=(*shape[:-1], groups, gs))
    a = _absmax_rows(b, xg)
    s = b.call("aten::div.Tensor", b.call("aten::clamp.default", a, scheme.group_eps), fmax)
    if scheme.use_ue8m0:
        s = b.call("aten::exp2.default",
                   b.call("aten::ceil.default", b.call("aten::log2.default", s)))
    y = b.call("aten::clamp.default", b.call("aten::div.Tensor", xg, s), -fmax, fmax)
    q = b.call("aten::flatten.using_ints", b.convert(y, scheme.dtype), -2, -1, shape=shape)
    return [q, scales_layout(b, s, scheme, shape, groups)]


def _int8_round(b: TorchBuilder, xs: SSAValue) -> SSAValue:
    y = b.call("aten::clamp.default", b.call("aten::round.default", xs), -128.0, 127.0)
    return b.convert(y, torch.int8)


def static_int8(b: TorchBuilder, x: SSAValue, scale: SSAValue) -> SSAValue:
    return _int8_round(b, b.call("aten::div.Tensor", b.convert(x, F32), b.convert(scale, F32)))


def per_token_int8(b: TorchBuilder, x: SSAValue) -> list[SSAValue]:
    xf = b.convert(x, F32)
    s = b.call("aten::div.Tensor", _absmax_rows(b, xf), INT8_MAX)
    zero_row = b.call("aten::eq.Scalar", s, 0, dtype=torch.bool)
    # A zero row has s = 0: its q is 0 (0/0 would be NaN).
    y = b.call("aten::where.self", zero_row, b.call("aten::zeros_like.default", xf),
               b.call("aten::div.Tensor", xf, s), dtype=F32)
    return [_int8_round(b, y), _rows(b, s)]


def quant(
    b: TorchBuilder,
    x: SSAValue,
    scheme: QuantScheme,
    scale: SSAValue | None,
    scale_ub: SSAValue | None,
    zero_point: SSAValue | None = None,
) -> list[SSAValue]:
    """fused.quant_native: q, then the computed scales (none for a static scheme)."""
    if not scheme.variant.is_default or zero_point is not None:
        return quant_variant(b, x, scheme, scale, scale_ub, zero_point)
    if scheme.static:
        assert scale is not None
        return [static_fp8(b, x, scale, scheme.dtype) if scheme.is_fp8 else static_int8(b, x, scale)]
    if scheme.dtype == torch.int8:
        return per_token_int8(b, x)
    if scheme.granularity == "tensor":
        return dynamic_fp8(b, x, scheme.dtype)
    if scheme.granularity == "token":
        return per_token_fp8(b, x, scale_ub, scheme.dtype)
    return per_group_fp8(b, x, scheme)


def _unfused_quant(b: TorchBuilder, op: Operation) -> list[SSAValue]:
    assert isinstance(op, QuantOp)
    scheme = op.quant_scheme()
    scale = op.static_scale() if scheme.static else None
    return quant(b, op.x, scheme, scale, op.scale_upper_bound(), op.zero_point_operand())


# --- fused ops: the composition of the unfused decompositions ------------------------------


def _fused_quant(b: TorchBuilder, op: Operation, y: SSAValue) -> list[SSAValue]:
    assert isinstance(op, FusedQuantOp)
    return quant(b, y, op.quant_scheme(), op.scale, op.scale_ub, op.zero_point)


def rms_norm_quant(b: TorchBuilder, op: Operation) -> list[SSAValue]:
    (y,) = rms_norm(b, op)
    return _fused_quant(b, op, y)


def fused_add_rms_norm_quant(b: TorchBuilder, op: Operation) -> list[SSAValue]:
    y, residual_out = fused_add_rms_norm(b, op)
    q, *scales = _fused_quant(b, op, y)
    return [q, residual_out, *scales]


def act_and_mul_quant(b: TorchBuilder, op: Operation) -> list[SSAValue]:
    return _fused_quant(b, op, act_and_mul_value(b, op))


DECOMPOSITIONS: dict[str, Callable[[TorchBuilder, Operation], list[SSAValue]]] = {
    "rms_norm": rms_norm,
    "fused_add_rms_norm": fused_add_rms_norm,
    "static_scaled_fp8_quant": _unfused_quant,
    "dynamic_scaled_fp8_quant": _unfused_quant,
    "dynamic_per_token_scaled_fp8_quant": _unfused_quant,
    "per_token_group_fp8_quant": _unfused_quant,
    "static_scaled_int8_quant": _unfused_quant,
    "dynamic_per_token_scaled_int8_quant": _unfused_quant,
    **{name: act_and_mul for name in ACTIVATIONS},
    "rms_norm_quant": rms_norm_quant,
    "fused_add_rms_norm_quant": fused_add_rms_norm_quant,
    **{name: act_and_mul_quant for name in FUSED_ACT_OPS},
}


def decompose(op: Operation) -> tuple[list[Operation], list[SSAValue]]:
    """The torch.call ops computing `op` as its native does, and the values of its results."""
    b = TorchBuilder()
    assert isinstance(op, SemanticSignature)
    values = DECOMPOSITIONS[op.SEMANTIC_NAME](b, op)
    assert len(values) == len(op.results), (op.name, len(values), len(op.results))
    return b.ops, values
