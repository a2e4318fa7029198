"""The Triton implementation of every op, with exactly its native signature (docs/OPS.md).

These are what `register()` registers as provider "triton" and what the torch custom ops
`torch.ops.vllm_xdsl_triton.<op>` run. Annotations are real (custom op schemas).
"""

from collections.abc import Callable
from functools import lru_cache

import torch
from torch import Tensor

from vllm_xdsl.backends.triton import conversion_check  # noqa: F401 - installs launch's check
from vllm_xdsl.backends.triton import launch as L
from vllm_xdsl.backends.triton.spec import variant_fields
from vllm_xdsl.core.catalog import SCHEME_FIELDS
from vllm_xdsl.core.dtypes import fp8_max
from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS, QuantScheme
from vllm_xdsl.core.variant import (
    DEFAULT_VARIANT,
    QuantVariant,
    parse_variant,
    variant_problem_beyond,
)
from vllm_xdsl.ops.fused_signature import flat_fused

_E4M3 = torch.float8_e4m3fn
_INT8_STATIC = QuantScheme(torch.int8, True, "tensor")
_INT8_TOKEN = QuantScheme(torch.int8, False, "token")


def _variant(op: str, zero_point: Tensor | None, variant: str, **scheme: object) -> QuantVariant:
    """The variant, if the kernels implement it (the same check as supports_args)."""
    if not variant and zero_point is None:
        return DEFAULT_VARIANT
    args = {"variant": variant, "zero_point": zero_point, **scheme}
    problem = variant_problem_beyond(args, "triton", variant_fields(op, args))
    if problem is not None:
        raise ValueError(f"{op}: {problem}")
    return parse_variant(variant)


@lru_cache(maxsize=256)
def _fp8(op: str, fp8_dtype: torch.dtype, *rest) -> QuantScheme:
    """The fp8 scheme of an unfused fp8 op (ValueError naming the op for a non-fp8 dtype)."""
    try:
        fp8_max(fp8_dtype)
    except ValueError as e:
        raise ValueError(f"{op}: {e}") from None
    return QuantScheme(fp8_dtype, *rest)


def rms_norm(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> Tensor:
    return L.norm(x, None, weight, epsilon, variance_size)[0]


def fused_add_rms_norm(
    x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float, rounded_sum: bool = False
) -> tuple[Tensor, Tensor]:
    out, residual_out = L.norm(x, residual, weight, epsilon, rounded_sum=rounded_sum)
    return out, residual_out


def static_scaled_fp8_quant(
    x: Tensor, scale: Tensor, fp8_dtype: torch.dtype = _E4M3, zero_point: Tensor | None = None,
    variant: str = "",
) -> Tensor:
    v = _variant("static_scaled_fp8_quant", zero_point, variant)
    scheme = _fp8("static_scaled_fp8_quant", fp8_dtype, True, "tensor", 0, False, False, DEFAULT_GROUP_EPS, v)
    return L.quant(x, scheme, scale, zero_point=zero_point)[0]


def dynamic_scaled_fp8_quant(
    x: Tensor, fp8_dtype: torch.dtype = _E4M3, zero_point: Tensor | None = None, variant: str = ""
) -> tuple[Tensor, Tensor]:
    v = _variant("dynamic_scaled_fp8_quant", zero_point, variant)
    q, scale = L.quant(
        x, _fp8("dynamic_scaled_fp8_quant", fp8_dtype, False, "tensor", 0, False, False, DEFAULT_GROUP_EPS, v),
        zero_point=zero_point)
    assert scale is not None
    return q, scale


def dynamic_per_token_scaled_fp8_quant(
    x: Tensor, scale_ub: Tensor | None = None, fp8_dtype: torch.dtype = _E4M3,
    zero_point: Tensor | None = None, variant: str = "",
) -> tuple[Tensor, Tensor]:
    v = _variant("dynamic_per_token_scaled_fp8_quant", zero_point, variant)
    scheme = _fp8("dynamic_per_token_scaled_fp8_quant", fp8_dtype, False, "token", 0, False,
                  False, DEFAULT_GROUP_EPS, v)
    q, scales = L.quant(x, scheme, None, scale_ub, zero_point=zero_point)
    assert scales is not None
    return q, scales


def per_token_group_fp8_quant(
    x: Tensor,
    group_size: int,
    column_major_scales: bool = False,
    use_ue8m0: bool = False,
    eps: float = DEFAULT_GROUP_EPS,
    fp8_dtype: torch.dtype = _E4M3,
    zero_point: Tensor | None = None,
    variant: str = "",
) -> tuple[Tensor, Tensor]:
    v = _variant("per_token_group_fp8_quant", zero_point, variant)
    if group_size <= 0:
        raise ValueError(f"per_token_group_fp8_quant: group_size {group_size} must be positive")
    scheme = _fp8(
        "per_token_group_fp8_quant",
        fp8_dtype,
        False,
        "group",
        group_size,
        column_major_scales,
        use_ue8m0,
        eps,
        v,
    )
    q, scales = L.quant(x, scheme, zero_point=zero_point)
    assert scales is not None
    return q, scales


def static_scaled_int8_quant(
    x: Tensor, scale: Tensor, zero_point: Tensor | None = None, variant: str = ""
) -> Tensor:
    v = _variant("static_scaled_int8_quant", zero_point, variant)
    scheme = _INT8_STATIC if v.is_default else QuantScheme(torch.int8, True, "tensor", variant=v)
    return L.quant(x, scheme, scale, zero_point=zero_point)[0]


def dynamic_per_token_scaled_int8_quant(
    x: Tensor, zero_point: Tensor | None = None, variant: str = ""
) -> tuple[Tensor, Tensor]:
    v = _variant("dynamic_per_token_scaled_int8_quant", zero_point, variant)
    scheme = _INT8_TOKEN if v.is_default else QuantScheme(torch.int8, False, "token", variant=v)
    q, scales = L.quant(x, scheme, zero_point=zero_point)
    assert scales is not None
    return q, scales


def silu_and_mul(x: Tensor, up: Tensor | None = None) -> Tensor:
    return L.act("silu_and_mul", x, up)[0]


def gelu_and_mul(x: Tensor, up: Tensor | None = None) -> Tensor:
    return L.act("gelu_and_mul", x, up)[0]


def gelu_tanh_and_mul(x: Tensor, up: Tensor | None = None) -> Tensor:
    return L.act("gelu_tanh_and_mul", x, up)[0]


def fatrelu_and_mul(x: Tensor, threshold: float = 0.0, up: Tensor | None = None) -> Tensor:
    return L.act("fatrelu_and_mul", x, up, scalars=(float(threshold),))[0]


def gelu_and_mul_sparse(
    x: Tensor, std_multiplier: float, approximate: str = "none", up: Tensor | None = None
) -> Tensor:
    return L.sparse_act("gelu_and_mul_sparse", x, std_multiplier, approximate, up)


def _scheme(op: str, scale: Tensor | None, scale_ub: Tensor | None,
            zero_point: Tensor | None, fields: tuple) -> QuantScheme:
    """The fused launchers' Build (ops/fused_signature.py): the variant check of
    supports_args, then the native's scheme, cached (a launch must not pay to rebuild it)."""
    variant = fields[_VARIANT]
    if variant or zero_point is not None:  # (_variant's own shortcut, one call sooner)
        _variant(op, zero_point, variant, static=fields[_STATIC],
                 granularity=fields[_GRANULARITY])
    return L.fused_scheme(op, scale, scale_ub, *fields)


_STATIC, _GRANULARITY, _VARIANT = (SCHEME_FIELDS.index(n) for n in ("static", "granularity",
                                                                     "variant"))


@flat_fused("rms_norm_quant", build=_scheme)
def rms_norm_quant(
    x: Tensor, weight: Tensor | None, epsilon: float, scheme: QuantScheme,
    scale: Tensor | None, scale_ub: Tensor | None, zero_point: Tensor | None,
) -> tuple[Tensor, Tensor]:
    _check_groups("rms_norm_quant", x, scheme)
    q, scales = L.norm(x, None, weight, epsilon, None, scheme, scale, scale_ub,
                       zero_point=zero_point)
    return q, scales


@flat_fused("fused_add_rms_norm_quant", build=_scheme)
def fused_add_rms_norm_quant(
    x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float, rounded_sum: bool,
    scheme: QuantScheme, scale: Tensor | None, scale_ub: Tensor | None,
    zero_point: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    _check_groups("fused_add_rms_norm_quant", x, scheme)
    q, residual_out, scales = L.norm(x, residual, weight, epsilon, None, scheme, scale, scale_ub,
                                     zero_point=zero_point, rounded_sum=rounded_sum)
    return q, residual_out, scales


def _act_and_mul_quant(name: str) -> Callable[..., tuple[Tensor, Tensor]]:
    """The fused launcher of an act-and-mul op, with the native's signature."""

    @flat_fused(f"{name}_quant", build=_scheme)
    def fused(
        x: Tensor, up: Tensor | None, scheme: QuantScheme, scale: Tensor | None,
        scale_ub: Tensor | None, zero_point: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        q, scales = L.act(name, x, up, scheme, scale, scale_ub, zero_point)
        return q, scales

    return fused


silu_and_mul_quant = _act_and_mul_quant("silu_and_mul")
gelu_and_mul_quant = _act_and_mul_quant("gelu_and_mul")
gelu_tanh_and_mul_quant = _act_and_mul_quant("gelu_tanh_and_mul")


def _check_groups(op: str, x: Tensor, scheme: QuantScheme) -> None:
    hidden = x.shape[-1] if x.dim() else 0
    if scheme.granularity == "group" and hidden % scheme.group_size:
        raise ValueError(
            f"{op}: group_size {scheme.group_size} does not divide hidden size {hidden}"
        )


FUNCTIONS = {
    name: globals()[name]
    for name in (
        "rms_norm",
        "fused_add_rms_norm",
        "static_scaled_fp8_quant",
        "dynamic_scaled_fp8_quant",
        "dynamic_per_token_scaled_fp8_quant",
        "per_token_group_fp8_quant",
        "static_scaled_int8_quant",
        "dynamic_per_token_scaled_int8_quant",
        "silu_and_mul",
        "gelu_and_mul",
        "gelu_tanh_and_mul",
        "fatrelu_and_mul",
        "gelu_and_mul_sparse",
        "rms_norm_quant",
        "fused_add_rms_norm_quant",
        "silu_and_mul_quant",
        "gelu_and_mul_quant",
        "gelu_tanh_and_mul_quant",
    )
}
