"""The native contract of every quant variant (docs/OPS.md, "Variants"): one function.

`quantize_variant(x, scheme, scale, scale_ub, zero_point)` computes what a scheme with a
non-default variant (or a zero point) denotes. A zero point is per tensor ([] / [1]), per
token (x's shape with a last dim of 1) or, for a per-group scheme, per group (x's leading
dims and G: one per scale, compressed-tensors' dynamic group zero point). Every rounding is explicit: values live in
f32, and a "rounded to bf16" step is `.to(bf16).float()` (what torch computes for a bf16
op: the f32 result rounded once). With the default variant and no zero point it computes
the OPS.md rows exactly (test_ops_variants.py checks it against natives.py).

Like natives.py this runs on fake tensors (no `.item()`, no data-dependent shapes).
"""

import struct

import torch
from torch import Tensor

from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.ops.dtypes import to_torch

_F32 = torch.float32


def _rounded(v: Tensor, dtype: torch.dtype) -> Tensor:
    return v if dtype == _F32 else v.to(dtype).to(_F32)


def _held_as(value: float, dtype: torch.dtype) -> float:
    """`value` as a tensor of `dtype` holds it (round to nearest even), as a Python float:
    computed without a tensor, so that a trace of the native has no tensor constant."""
    (f32,) = struct.unpack("<f", struct.pack("<f", value))
    if dtype == torch.float16:
        return struct.unpack("<e", struct.pack("<e", f32))[0]
    if dtype == torch.bfloat16:
        (bits,) = struct.unpack("<I", struct.pack("<f", f32))
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    return f32 if dtype == torch.float32 else value


def dynamic_scale(xs: Tensor, scheme: QuantScheme, scale_ub: Tensor | None) -> Tensor:
    """The f32 value of the dynamic scale of `xs` (x, or x grouped as [..., G, gs])."""
    v = scheme.variant
    if scheme.granularity == "tensor":
        a = xs.abs().amax().reshape(1)
    else:
        a = xs.abs().amax(dim=-1, keepdim=True)
    if scale_ub is not None:
        a = torch.minimum(a, scale_ub.to(_F32))
    if scheme.granularity == "group" and not v.floor:
        a = torch.clamp(a, min=scheme.group_eps)  # the contract floors the group absmax
    s = _rounded(a / (v.scale_range or scheme.qmax), to_torch(v.scale_dtype))
    if scheme.use_ue8m0:
        s = torch.exp2(torch.ceil(torch.log2(s)))
    if v.floor == "min_scale" or (not v.floor and scheme.is_fp8 and scheme.granularity != "group"):
        s = torch.clamp(s, min=1.0 / (scheme.qmax * 512.0))
    elif v.floor == "zero_eps":
        s = s.masked_fill(s == 0, _held_as(v.floor_eps, to_torch(v.scale_dtype)))
    return _rounded(s, to_torch(v.scale_dtype))  # the floored scale is a scale-dtype value too


def quantize_variant(
    x: Tensor, scheme: QuantScheme, scale: Tensor | None, scale_ub: Tensor | None,
    zero_point: Tensor | None,
) -> tuple[Tensor, Tensor | None]:
    """(q, computed scales in the variant's scale dtype; None for a static scheme). Every
    operand is passed (None where absent): callers are the natives, which hold them all."""
    v = scheme.variant
    xf = x.to(_F32)
    xs = xf
    if scheme.granularity == "group":
        hidden = x.shape[-1]
        if hidden % scheme.group_size:
            raise ValueError(
                f"group_size {scheme.group_size} does not divide hidden size {hidden}"
            )
        xs = xf.reshape(*x.shape[:-1], hidden // scheme.group_size, scheme.group_size)
    if scheme.static:
        if scale is None:
            raise ValueError(f"static quant scheme {scheme} needs a scale")
        s = scale.to(_F32)
    else:
        s = dynamic_scale(xs, scheme, scale_ub)
    y = xs / s if scheme.scaling == "div" else xs * torch.reciprocal(s)
    if scheme.dtype == torch.int8 and not scheme.static and not v.floor:
        y = torch.where(s == 0, torch.zeros_like(y), y)  # a zero row quantizes to 0
    y = _rounded(y, to_torch(v.quotient_dtype))
    if zero_point is not None:
        zp = zero_point.to(to_torch(v.quotient_dtype)).to(_F32)
        if scheme.granularity == "group" and zp.dim() == x.dim():
            zp = zp.unsqueeze(-1)  # one per group ([..., G]) onto the grouped [..., G, gs]
        y = _rounded(y + zp, to_torch(v.quotient_dtype))
    if scheme.dtype == torch.int8:
        q = torch.round(y).clamp(-128.0, 127.0).to(torch.int8)
    else:
        q = torch.clamp(y, -scheme.qmax, scheme.qmax).to(scheme.dtype)
    q = q.reshape(x.shape)
    if scheme.static:
        return q, None
    return q, _scales(s.to(to_torch(v.scale_dtype)), scheme, x)


def _scales(s: Tensor, scheme: QuantScheme, x: Tensor) -> Tensor:
    if scheme.granularity == "tensor":
        return s.reshape(1)
    if scheme.granularity == "token":
        return s.reshape(-1, 1)
    s = s.squeeze(-1).flatten(0, -2)  # [T, G] (as reshape(-1, groups), without G)
    if scheme.column_major_scales:
        # Same shape [T, G], storage [G, T] (clone, not contiguous(): a [G, 1] view passes as
        # contiguous and would keep its strides).
        return s.t().clone(memory_format=torch.contiguous_format).t()
    return s
