"""Native fused ops: each is exactly the composition of the unfused natives it replaces.

The quant scheme travels as separate arguments (custom op schemas cannot hold a
QuantScheme): each native is written against the QuantScheme, and `flat_fused`
(ops/fused_signature.py) gives it the flat signature of its catalog spec and rebuilds and
validates the scheme (`scheme_of`); `quant_native` maps it to the one unfused quant it
denotes.
"""

from collections.abc import Callable
from functools import cache
from typing import Any

import torch
from torch import Tensor

from vllm_xdsl.core.catalog import FORM_FIELDS, FUSED_SPECS, quant_spec_of
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.ops import natives as N
from vllm_xdsl.ops.activations import ACT_AND_MUL
from vllm_xdsl.ops.fused_signature import flat_fused, scheme_of  # noqa: F401 - public here
from vllm_xdsl.ops.natives_variant import quantize_variant


def quant_native(
    x: Tensor,
    scheme: QuantScheme,
    scale: Tensor | None = None,
    scale_ub: Tensor | None = None,
    zero_point: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """The unfused quant that `scheme` denotes: (q, computed scales), scales None if static."""
    if scheme.static and scale is None:
        raise ValueError(f"static quant scheme {scheme} needs a scale")
    if not scheme.static and scale is not None:
        raise ValueError(f"dynamic quant scheme {scheme} takes no scale")
    if scale_ub is not None and not (scheme.is_fp8 and scheme.granularity == "token"):
        raise ValueError("scale_ub applies to dynamic per-token fp8 quantization only")
    if not scheme.variant.is_default or zero_point is not None:
        return quantize_variant(x, scheme, scale, scale_ub, zero_point)
    # The op of the scheme's form, called with the scheme's fields by parameter name.
    names, native = _form_native("fp8" if scheme.is_fp8 else "int8", scheme.static,
                                 scheme.granularity)
    args = {"x": x, "scale": scale, "scale_ub": scale_ub, "fp8_dtype": scheme.dtype,
            **{n: getattr(scheme, field) for n, field in FORM_FIELDS.items()}}
    out = native(**{n: args[n] for n in names if n in args})
    return (out, None) if scheme.static else out


@cache
def _form_native(dtype: str, static: bool, granularity: str
                 ) -> tuple[tuple[str, ...], Callable[..., Any]]:
    spec = quant_spec_of(dtype, static, granularity)
    # Every unfused quant's native is in ops/natives.py (read here without ops/op.py, which
    # imports this module through the catalog's references).
    if spec.native != f"{N.__name__}:{spec.name}":
        raise AssertionError(f"{spec.name}: its native {spec.native} is not in {N.__name__}")
    return spec.param_names, getattr(N, spec.name)


def _quant(
    y: Tensor, scheme: QuantScheme, scale: Tensor | None, scale_ub: Tensor | None,
    zero_point: Tensor | None,
) -> tuple[Tensor, Tensor]:
    q, scales = quant_native(y, scheme, scale, scale_ub, zero_point)
    if scales is None:
        # Static: return a float32 [1] copy; custom ops cannot return aliases of inputs.
        assert scale is not None
        scales = scale.to(torch.float32).reshape(1).clone()
    return q, scales


# The scheme is built and checked (scheme_of) before anything is computed.
@flat_fused("rms_norm_quant")
def rms_norm_quant(
    x: Tensor, weight: Tensor | None, epsilon: float, scheme: QuantScheme,
    scale: Tensor | None, scale_ub: Tensor | None, zero_point: Tensor | None,
) -> tuple[Tensor, Tensor]:
    return _quant(N.rms_norm(x, weight, epsilon), scheme, scale, scale_ub, zero_point)


@flat_fused("fused_add_rms_norm_quant")
def fused_add_rms_norm_quant(
    x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float, rounded_sum: bool,
    scheme: QuantScheme, scale: Tensor | None, scale_ub: Tensor | None,
    zero_point: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    y, residual_out = N.fused_add_rms_norm(x, residual, weight, epsilon, rounded_sum)
    q, scales = _quant(y, scheme, scale, scale_ub, zero_point)
    return q, residual_out, scales


def _act_and_mul_quant(name: str, producer: str) -> Callable[..., tuple[Tensor, Tensor]]:
    """The fused native of an act-and-mul op: the act-and-mul native, then the quant."""
    act = ACT_AND_MUL[producer]

    @flat_fused(name)
    def fused(
        x: Tensor, up: Tensor | None, scheme: QuantScheme, scale: Tensor | None,
        scale_ub: Tensor | None, zero_point: Tensor | None,
    ) -> tuple[Tensor, Tensor]:
        return _quant(act(x, up), scheme, scale, scale_ub, zero_point)

    return fused


# The fused act-and-mul natives (`fused.silu_and_mul_quant`, ...), one per fused catalog
# spec whose producer is an act-and-mul op.
ACT_AND_MUL_QUANT: dict[str, Callable[..., tuple[Tensor, Tensor]]] = {
    s.name: _act_and_mul_quant(s.name, s.producer)
    for s in FUSED_SPECS if s.producer is not None and s.producer in ACT_AND_MUL
}


def __getattr__(name: str) -> Callable[..., tuple[Tensor, Tensor]]:
    """`fused.<op>_quant` of an act-and-mul op (the catalog's native references)."""
    try:
        return ACT_AND_MUL_QUANT[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
