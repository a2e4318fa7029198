"""Native torch implementations of the unfused ops: the contracts of docs/OPS.md.

Each function follows its OPS.md row literally (fp32 compute, the order of casts, multiply
by the reciprocal where the row says so and divide where it divides). These functions are
the specification, the fallback implementation and the fake (meta) implementation, so they
must also run on fake tensors: no `.item()`, no data-dependent shapes.

Annotations are real (no `from __future__ import annotations`): torch.library infers the
custom op schema from them.
"""

from typing import Any

import torch
from torch import Tensor

from vllm_xdsl.core.catalog import SPECS
from vllm_xdsl.core.dtypes import INT8_MAX, fp8_max
from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS, QuantScheme
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.ops.natives_variant import quantize_variant

_F32 = torch.float32
_FP32_OPMATH = (torch.bfloat16, torch.float16)  # elementwise ops computed in fp32, rounded once


def _quantize_variant(
    op: str, x: Tensor, dtype: torch.dtype, variant: str, scale: Tensor | None = None,
    scale_ub: Tensor | None = None, zero_point: Tensor | None = None, **fields: Any,
) -> tuple[Tensor, Tensor | None]:
    """The unfused quant `op` with a variant or a zero point: its scheme is the op's form
    (catalog) with `dtype`, the variant and the scheme `fields` the op takes as parameters;
    ValueError naming the op."""
    form = SPECS[op].form
    assert form is not None, f"{op} is not an unfused quant"
    if form.dtype == "fp8":
        _check_fp8(dtype)
    try:
        scheme = QuantScheme(dtype, form.static, form.granularity, variant=parse_variant(variant),
                             **fields)
    except ValueError as e:
        raise ValueError(f"{op}: {e}") from None
    return quantize_variant(x, scheme, scale, scale_ub, zero_point)


def _check_fp8(fp8_dtype: torch.dtype) -> float:
    return fp8_max(fp8_dtype)  # raises ValueError naming the dtype


def _min_scale(fmax: float) -> float:
    # Floor of dynamic fp8 scales (OPS.md): keeps 1/scale finite for all-zero inputs.
    return 1.0 / (fmax * 512.0)


def rms_norm_fp32(
    xf: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None, out_dtype: torch.dtype
) -> Tensor:
    """RMSNorm of an fp32 tensor, rounded to `out_dtype` (shared by both norm ops)."""
    xv = xf if variance_size is None else xf[..., :variance_size]
    var = xv.pow(2).mean(dim=-1, keepdim=True)
    y = xf * torch.rsqrt(var + epsilon)
    if weight is not None:
        y = y.to(weight.dtype) * weight
    return y.to(out_dtype)


def rms_norm(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> Tensor:
    if variance_size is not None and not 0 < variance_size <= x.shape[-1]:
        raise ValueError(f"rms_norm: variance_size {variance_size} not in [1, {x.shape[-1]}]")
    return rms_norm_fp32(x.to(_F32), weight, epsilon, variance_size, x.dtype)


def fused_add_rms_norm(
    x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float, rounded_sum: bool = False
) -> tuple[Tensor, Tensor]:
    if rounded_sum and x.dtype in _FP32_OPMATH and residual.dtype == x.dtype:
        # torch's own add in bf16/f16 computes in fp32 and rounds once: the same bits as
        # (x.float() + residual.float()).to(dtype), in the one node an input graph has.
        residual_out = x + residual
        return rms_norm_fp32(residual_out.to(_F32), weight, epsilon, None, x.dtype), residual_out
    s = x.to(_F32) + residual.to(_F32)
    residual_out = s.to(x.dtype)
    if rounded_sum:
        # HF's add-then-norm (and vLLM's CUDA kernel): the norm reads residual_out.
        s = residual_out.to(_F32)
    # Otherwise the norm sees the unrounded fp32 sum, not residual_out.
    return rms_norm_fp32(s, weight, epsilon, None, x.dtype), residual_out


def static_scaled_fp8_quant(
    x: Tensor,
    scale: Tensor,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    zero_point: Tensor | None = None,
    variant: str = "",
) -> Tensor:
    if variant or zero_point is not None:
        return _quantize_variant("static_scaled_fp8_quant", x, fp8_dtype, variant, scale,
                                 zero_point=zero_point)[0]
    fmax = _check_fp8(fp8_dtype)
    inv = torch.reciprocal(scale.to(_F32))
    return torch.clamp(x.to(_F32) * inv, -fmax, fmax).to(fp8_dtype)


def dynamic_scaled_fp8_quant(
    x: Tensor,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    zero_point: Tensor | None = None,
    variant: str = "",
) -> tuple[Tensor, Tensor]:
    if variant or zero_point is not None:
        return _computed(_quantize_variant("dynamic_scaled_fp8_quant", x, fp8_dtype, variant,
                                           zero_point=zero_point))
    fmax = _check_fp8(fp8_dtype)
    absmax = x.to(_F32).abs().amax().reshape(1)
    scale = torch.clamp(absmax / fmax, min=_min_scale(fmax))
    return static_scaled_fp8_quant(x, scale, fp8_dtype), scale


def dynamic_per_token_scaled_fp8_quant(
    x: Tensor,
    scale_ub: Tensor | None = None,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    zero_point: Tensor | None = None,
    variant: str = "",
) -> tuple[Tensor, Tensor]:
    if variant or zero_point is not None:
        return _computed(_quantize_variant("dynamic_per_token_scaled_fp8_quant", x, fp8_dtype,
                                           variant, scale_ub=scale_ub, zero_point=zero_point))
    fmax = _check_fp8(fp8_dtype)
    xf = x.to(_F32)
    a = xf.abs().amax(dim=-1, keepdim=True)
    if scale_ub is not None:
        a = torch.minimum(a, scale_ub.to(_F32))
    s = torch.clamp(a / fmax, min=_min_scale(fmax))
    q = torch.clamp(xf / s, -fmax, fmax).to(fp8_dtype)
    return q, s.reshape(-1, 1)


def per_token_group_fp8_quant(
    x: Tensor,
    group_size: int,
    column_major_scales: bool = False,
    use_ue8m0: bool = False,
    eps: float = DEFAULT_GROUP_EPS,
    fp8_dtype: torch.dtype = torch.float8_e4m3fn,
    zero_point: Tensor | None = None,
    variant: str = "",
) -> tuple[Tensor, Tensor]:
    fmax = _check_fp8(fp8_dtype)
    hidden = x.shape[-1]
    if group_size <= 0 or hidden % group_size:
        raise ValueError(
            f"per_token_group_fp8_quant: group_size {group_size} does not divide hidden size {hidden}"
        )
    if variant or zero_point is not None:
        return _computed(_quantize_variant(
            "per_token_group_fp8_quant", x, fp8_dtype, variant, zero_point=zero_point,
            group_size=group_size, column_major_scales=column_major_scales, use_ue8m0=use_ue8m0,
            group_eps=eps,
        ))
    groups = hidden // group_size
    xg = x.to(_F32).reshape(*x.shape[:-1], groups, group_size)
    a = xg.abs().amax(dim=-1, keepdim=True)
    s = torch.clamp(a, min=eps) / fmax
    if use_ue8m0:
        s = torch.exp2(torch.ceil(torch.log2(s)))
    q = torch.clamp(xg / s, -fmax, fmax).to(fp8_dtype).reshape(x.shape)
    s = s.squeeze(-1).flatten(0, -2)  # [T, G] (as reshape(-1, groups), without G)
    if column_major_scales:
        # Same shape [T, G], transposed strides: storage is [G, T].
        return q, s.t().clone(memory_format=torch.contiguous_format).t()
    return q, s


def _int8_round(xs: Tensor) -> Tensor:
    # torch.round rounds half to even, as the int8 contract requires.
    return torch.round(xs).clamp(-128.0, 127.0).to(torch.int8)


def static_scaled_int8_quant(
    x: Tensor, scale: Tensor, zero_point: Tensor | None = None, variant: str = ""
) -> Tensor:
    if variant or zero_point is not None:
        return _quantize_variant("static_scaled_int8_quant", x, torch.int8, variant, scale,
                                 zero_point=zero_point)[0]
    return _int8_round(x.to(_F32) / scale.to(_F32))


def dynamic_per_token_scaled_int8_quant(
    x: Tensor, zero_point: Tensor | None = None, variant: str = ""
) -> tuple[Tensor, Tensor]:
    if variant or zero_point is not None:
        return _computed(_quantize_variant("dynamic_per_token_scaled_int8_quant", x, torch.int8,
                                           variant, zero_point=zero_point))
    xf = x.to(_F32)
    s = xf.abs().amax(dim=-1, keepdim=True) / INT8_MAX
    # A zero row has s = 0: its q is 0 (0/0 would be NaN).
    q = _int8_round(torch.where(s == 0, torch.zeros_like(xf), xf / s))
    return q, s.reshape(-1, 1)


def _computed(result: tuple[Tensor, Tensor | None]) -> tuple[Tensor, Tensor]:
    q, scales = result
    assert scales is not None  # a dynamic scheme returns its scales
    return q, scales
