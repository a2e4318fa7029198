"""The native provider's lowering of a quant variant: natives_variant.quantize_variant as
elementary torch ops, step for step (same casts, same order), so that evaluating them gives
the native's bits (test_ops_variants.py checks it)."""

from __future__ import annotations

import torch
from xdsl.ir import SSAValue

from vllm_xdsl.ops.scheme import QuantScheme
from vllm_xdsl.transforms.dispatch_torch import Enum, TorchBuilder, meta

F32 = torch.float32


def _rounded(b: TorchBuilder, v: SSAValue, dtype: torch.dtype) -> SSAValue:
    if dtype == F32:
        return v
    return b.call("prims::convert_element_type.default",
                  b.call("prims::convert_element_type.default", v, dtype, dtype=dtype), F32,
                  dtype=F32)


def _tokens(shape: tuple[int | None, ...]) -> int | None:
    tokens: int | None = 1
    for d in shape:
        tokens = None if d is None or tokens is None else tokens * d
    return tokens


def _dynamic_scale(b: TorchBuilder, xs: SSAValue, scheme: QuantScheme,
                   scale_ub: SSAValue | None) -> SSAValue:
    v = scheme.variant
    shape = meta(xs)[1]
    ab = b.call("aten::abs.default", xs)
    if scheme.granularity == "tensor":
        a = b.call("aten::reshape.default", b.call("aten::amax.default", ab, [], False, shape=()),
                   [1], shape=(1,))
    else:
        a = b.call("aten::amax.default", ab, [-1], True, shape=(*shape[:-1], 1))
    if scale_ub is not None:
        a = b.call("aten::minimum.default", a, b.convert(scale_ub, F32))
    if scheme.granularity == "group" and not v.floor:
        a = b.call("aten::clamp.default", a, scheme.group_eps)
    s = _rounded(b, b.call("aten::div.Tensor", a, v.scale_range or scheme.qmax), v.scale_dtype)
    if scheme.use_ue8m0:
        s = b.call("aten::exp2.default",
                   b.call("aten::ceil.default", b.call("aten::log2.default", s)))
    if v.floor == "min_scale" or (not v.floor and scheme.is_fp8 and scheme.granularity != "group"):
        s = b.call("aten::clamp.default", s, 1.0 / (scheme.qmax * 512.0))
    elif v.floor == "zero_eps":
        # The eps as the scale dtype holds it (torch.tensor(eps, dtype=scale dtype)).
        eps = torch.tensor(v.floor_eps, dtype=v.scale_dtype).float().item()
        zero = b.call("aten::eq.Scalar", s, 0, dtype=torch.bool)
        s = b.call("aten::where.ScalarSelf", zero, eps, s, dtype=F32)
    return _rounded(b, s, v.scale_dtype)


def quant_variant(
    b: TorchBuilder,
    x: SSAValue,
    scheme: QuantScheme,
    scale: SSAValue | None,
    scale_ub: SSAValue | None,
    zero_point: SSAValue | None,
) -> list[SSAValue]:
    """q, then the computed scales (none for a static scheme)."""
    v = scheme.variant
    shape = meta(x)[1]
    xf = b.convert(x, F32)
    xs = xf
    groups = None
    if scheme.granularity == "group":
        gs = scheme.group_size
        groups = None if shape[-1] is None else shape[-1] // gs
        xs = b.call("aten::unflatten.int", xf, -1, [-1 if groups is None else groups, gs],
                    shape=(*shape[:-1], groups, gs))
    if scheme.static:
        assert scale is not None
        s = b.convert(scale, F32)
    else:
        s = _dynamic_scale(b, xs, scheme, scale_ub)
    if scheme.scaling == "div":
        y = b.call("aten::div.Tensor", xs, s)
    else:
        y = b.call("aten::mul.Tensor", xs, b.call("aten::reciprocal.default", s))
    if scheme.dtype == torch.int8 and not scheme.static and not v.floor:
        zero = b.call("aten::eq.Scalar", s, 0, dtype=torch.bool)
        y = b.call("aten::where.self", zero, b.call("aten::zeros_like.default", y), y, dtype=F32)
    y = _rounded(b, y, v.quotient_dtype)
    if zero_point is not None:
        zp = b.convert(b.convert(zero_point, v.quotient_dtype), F32)
        zp_shape = meta(zp)[1]
        if scheme.granularity == "group" and len(zp_shape) == len(shape):
            zp = b.call("aten::unsqueeze.default", zp, -1, shape=(*zp_shape, 1))
        y = _rounded(b, b.call("aten::add.Tensor", y, zp, shape=meta(y)[1]), v.quotient_dtype)
    if scheme.dtype == torch.int8:
        y = b.call("aten::clamp.default", b.call("aten::round.default", y), -128.0, 127.0)
    else:
        y = b.call("aten::clamp.default", y, -scheme.qmax, scheme.qmax)
    q = b.convert(y, scheme.dtype)
    if scheme.granularity == "group":
        q = b.call("aten::flatten.using_ints", q, -2, -1, shape=shape)
    if scheme.static:
        return [q]
    s = b.convert(s, v.scale_dtype)
    return [q, scales_layout(b, s, scheme, shape, groups)]


def scales_layout(b: TorchBuilder, s: SSAValue, scheme: QuantScheme,
                  shape: tuple[int | None, ...], groups: int | None) -> SSAValue:
    """The computed scales as the native returns them: per tensor as they are, per token
    [T, 1], per group [T, G] (column-major storage if the scheme says so)."""
    if scheme.granularity == "tensor":
        return s
    tokens = _tokens(shape[:-1])
    if scheme.granularity == "token":
        return b.call("aten::reshape.default", s, [-1, 1], shape=(tokens, 1))
    if groups is not None:
        scales = b.call("aten::reshape.default", s, [-1, groups], shape=(tokens, groups))
    else:
        s = b.call("aten::squeeze.dim", s, -1, shape=(*shape[:-1], None))
        scales = b.call("aten::flatten.using_ints", s, 0, -2, shape=(tokens, None))
    if scheme.column_major_scales:
        t = b.call("aten::transpose.int", scales, 0, 1, shape=(groups, tokens))
        t = b.call("aten::clone.default", t,
                   kwargs={"memory_format": Enum("torch.contiguous_format")})
        scales = b.call("aten::transpose.int", t, 0, 1, shape=(tokens, groups))
    return scales
