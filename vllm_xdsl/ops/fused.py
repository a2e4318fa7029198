"""Native fused ops: each is exactly the composition of the unfused natives it replaces.

The quant scheme travels as separate arguments (custom op schemas cannot hold a
QuantScheme); `scheme_of` rebuilds and validates it, and `quant_native` maps it to the
one unfused quant it denotes.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS, QuantScheme, granularity_of
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.ops import natives as N
from vllm_xdsl.ops.activations import ACT_AND_MUL
from vllm_xdsl.ops.natives_variant import quantize_variant


def quant_native(
    x: Tensor,
    scheme: QuantScheme,
    scale: Tensor | None = None,
    scale_ub: Tensor | None = None,
    zero_point: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """The unfused quant that `scheme` denotes: (q, computed scales), scales None if static."""
    if not scheme.variant.is_default or zero_point is not None:
        if scheme.static != (scale is not None):
            raise ValueError(f"quant scheme {scheme}: a scale is given exactly when static")
        if scale_ub is not None and not (scheme.is_fp8 and scheme.granularity == "token"):
            raise ValueError("scale_ub applies to dynamic per-token fp8 quantization only")
        return quantize_variant(x, scheme, scale, scale_ub, zero_point)
    if scheme.static:
        if scale is None:
            raise ValueError(f"static quant scheme {scheme} needs a scale")
        if scheme.is_fp8:
            return N.static_scaled_fp8_quant(x, scale, scheme.dtype), None
        return N.static_scaled_int8_quant(x, scale), None
    if scale is not None:
        raise ValueError(f"dynamic quant scheme {scheme} takes no scale")
    if scale_ub is not None and not (scheme.is_fp8 and scheme.granularity == "token"):
        raise ValueError("scale_ub applies to dynamic per-token fp8 quantization only")
    if scheme.dtype == torch.int8:
        return N.dynamic_per_token_scaled_int8_quant(x)
    if scheme.granularity == "tensor":
        return N.dynamic_scaled_fp8_quant(x, scheme.dtype)
    if scheme.granularity == "token":
        return N.dynamic_per_token_scaled_fp8_quant(x, scale_ub, scheme.dtype)
    return N.per_token_group_fp8_quant(
        x, scheme.group_size, scheme.column_major_scales, scheme.use_ue8m0, scheme.group_eps,
        scheme.dtype,
    )


def scheme_of(
    op: str,
    scale: Tensor | None,
    scale_ub: Tensor | None,
    quant_dtype: torch.dtype,
    static: bool,
    granularity: str,
    group_size: int,
    column_major_scales: bool,
    use_ue8m0: bool,
    group_eps: float,
    variant: str = "",
) -> QuantScheme:
    """The scheme of a fused op's arguments; ValueError naming the op if it is not allowed."""
    try:
        scheme = QuantScheme(
            quant_dtype, static, granularity_of(granularity), group_size, column_major_scales,
            use_ue8m0, group_eps, parse_variant(variant),
        )
    except ValueError as e:
        raise ValueError(f"{op}: {e}") from None
    if not static and granularity == "tensor":
        raise ValueError(
            f"{op}: dynamic per-tensor quantization cannot be fused "
            "(it needs a global reduction before any row can be quantized)"
        )
    if static != (scale is not None):
        need = "needs a scale" if static else "takes scale=None"
        raise ValueError(f"{op}: a {'static' if static else 'dynamic'} scheme {need}")
    if scale_ub is not None and not (scheme.is_fp8 and granularity == "token"):
        raise ValueError(f"{op}: scale_ub applies to dynamic per-token fp8 quantization only")
    return scheme


def _quant(
    op: str, y: Tensor, scale: Tensor | None, scale_ub: Tensor | None, zero_point: Tensor | None,
    *scheme_args
) -> tuple[Tensor, Tensor]:
    scheme = scheme_of(op, scale, scale_ub, *scheme_args)
    q, scales = quant_native(y, scheme, scale, scale_ub, zero_point)
    if scales is None:
        # Static: return a float32 [1] copy; custom ops cannot return aliases of inputs.
        assert scale is not None
        scales = scale.to(torch.float32).reshape(1).clone()
    return q, scales


def rms_norm_quant(
    x: Tensor,
    weight: Tensor | None,
    epsilon: float,
    scale: Tensor | None,
    scale_ub: Tensor | None,
    quant_dtype: torch.dtype,
    static: bool,
    granularity: str,
    group_size: int = 0,
    column_major_scales: bool = False,
    use_ue8m0: bool = False,
    group_eps: float = DEFAULT_GROUP_EPS,
    zero_point: Tensor | None = None,
    variant: str = "",
) -> tuple[Tensor, Tensor]:
    scheme_args = (quant_dtype, static, granularity, group_size, column_major_scales, use_ue8m0,
                   group_eps, variant)
    scheme_of("rms_norm_quant", scale, scale_ub, *scheme_args)  # reject before computing
    y = N.rms_norm(x, weight, epsilon)
    return _quant("rms_norm_quant", y, scale, scale_ub, zero_point, *scheme_args)


def fused_add_rms_norm_quant(
    x: Tensor,
    residual: Tensor,
    weight: Tensor | None,
    epsilon: float,
    scale: Tensor | None,
    scale_ub: Tensor | None,
    quant_dtype: torch.dtype,
    static: bool,
    granularity: str,
    group_size: int = 0,
    column_major_scales: bool = False,
    use_ue8m0: bool = False,
    group_eps: float = DEFAULT_GROUP_EPS,
    zero_point: Tensor | None = None,
    variant: str = "",
    rounded_sum: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    scheme_args = (quant_dtype, static, granularity, group_size, column_major_scales, use_ue8m0,
                   group_eps, variant)
    scheme_of("fused_add_rms_norm_quant", scale, scale_ub, *scheme_args)
    y, residual_out = N.fused_add_rms_norm(x, residual, weight, epsilon, rounded_sum)
    q, scales = _quant("fused_add_rms_norm_quant", y, scale, scale_ub, zero_point, *scheme_args)
    return q, residual_out, scales


def _act_and_mul_quant(name: str) -> Callable[..., tuple[Tensor, Tensor]]:
    """The fused native of an act-and-mul op: the act-and-mul native, then the quant."""
    op = f"{name}_quant"
    act = ACT_AND_MUL[name]

    def fused(
        x: Tensor,
        scale: Tensor | None,
        scale_ub: Tensor | None,
        quant_dtype: torch.dtype,
        static: bool,
        granularity: str,
        group_size: int = 0,
        column_major_scales: bool = False,
        use_ue8m0: bool = False,
        group_eps: float = DEFAULT_GROUP_EPS,
        zero_point: Tensor | None = None,
        variant: str = "",
        up: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        scheme_args = (quant_dtype, static, granularity, group_size, column_major_scales,
                       use_ue8m0, group_eps, variant)
        scheme_of(op, scale, scale_ub, *scheme_args)
        return _quant(op, act(x, up), scale, scale_ub, zero_point, *scheme_args)

    fused.__name__ = fused.__qualname__ = op
    return fused


# `up` comes last (optional): the one-operand calls of silu_and_mul_quant keep their meaning.
silu_and_mul_quant = _act_and_mul_quant("silu_and_mul")
gelu_and_mul_quant = _act_and_mul_quant("gelu_and_mul")
gelu_tanh_and_mul_quant = _act_and_mul_quant("gelu_tanh_and_mul")
