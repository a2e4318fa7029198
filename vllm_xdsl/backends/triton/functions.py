"""The Triton implementation of every op, with exactly its native signature (docs/OPS.md).

These are what `register()` registers as provider "triton" and what the torch custom ops
`torch.ops.vllm_xdsl_triton.<op>` run. Annotations are real (custom op schemas).
"""

import inspect
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import torch
from torch import Tensor

from vllm_xdsl.backends.triton import conversion_check  # noqa: F401 - installs launch's check
from vllm_xdsl.backends.triton import launch as L
from vllm_xdsl.backends.triton.spec import variant_fields
from vllm_xdsl.core.catalog import FORM_FIELDS, SCHEME_FIELDS, SPECS, OpSpec
from vllm_xdsl.core.dtypes import fp8_max
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.core.variant import (
    DEFAULT_VARIANT,
    QuantVariant,
    parse_variant,
    variant_problem_beyond,
)
from vllm_xdsl.ops.fused_signature import flat_fused
from vllm_xdsl.ops.op import native_binder


def _variant(op: str, zero_point: Tensor | None, variant: str, **scheme: object) -> QuantVariant:
    """The variant, if the kernels implement it (the same check as supports_args)."""
    if not variant and zero_point is None:
        return DEFAULT_VARIANT
    args = {"variant": variant, "zero_point": zero_point, **scheme}
    problem = variant_problem_beyond(args, "triton", variant_fields(op, args))
    if problem is not None:
        raise ValueError(f"{op}: {problem}")
    return parse_variant(variant)


def rms_norm(
    x: Tensor, weight: Tensor | None, epsilon: float, variance_size: int | None = None
) -> Tensor:
    return L.norm(x, None, weight, epsilon, variance_size)[0]


def fused_add_rms_norm(
    x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float, rounded_sum: bool = False
) -> tuple[Tensor, Tensor]:
    out, residual_out = L.norm(x, residual, weight, epsilon, rounded_sum=rounded_sum)
    return out, residual_out


def _named(spec: OpSpec, signature: inspect.Signature,
           launch: Callable[..., Any]) -> Callable[..., Any]:
    launch.__name__ = launch.__qualname__ = spec.name
    launch.__dict__["__signature__"] = signature
    return launch


@lru_cache(maxsize=256)
def _form_scheme(op: str, dtype: torch.dtype, variant: QuantVariant,
                 fields: tuple[tuple[str, Any], ...]) -> QuantScheme:
    """The scheme of an unfused quant's arguments (the native's checks and messages)."""
    form = SPECS[op].form
    assert form is not None
    if form.dtype == "fp8":
        try:
            fp8_max(dtype)
        except ValueError as e:
            raise ValueError(f"{op}: {e}") from None
    return QuantScheme(dtype, form.static, form.granularity, variant=variant,
                       **{FORM_FIELDS[n]: v for n, v in fields})


def _unfused_quant(spec: OpSpec) -> Callable[..., Any]:
    """The launcher of an unfused quant op, with its native's signature: its form and its
    scheme parameters make the scheme; q, and the scales of a dynamic form."""
    signature, bind = native_binder(spec)
    assert spec.form is not None
    static, grouped, names = spec.form.static, spec.form.granularity == "group", spec.param_names
    at = {n: names.index(n) for n in names}
    fields = [(n, at[n]) for n in names if n in FORM_FIELDS]
    scale, scale_ub = at.get("scale"), at.get("scale_ub")
    dtype_at = at.get("fp8_dtype")

    def launch(*args: Any, **kwargs: Any) -> Any:
        values = bind(args, kwargs)
        zero_point, variant = values[at["zero_point"]], values[at["variant"]]
        v = _variant(spec.name, zero_point, variant)
        group = {n: values[i] for n, i in fields}
        if grouped and group["group_size"] <= 0:
            raise ValueError(f"{spec.name}: group_size {group['group_size']} must be positive")
        dtype = torch.int8 if dtype_at is None else values[dtype_at]
        scheme = _form_scheme(spec.name, dtype, v, tuple(group.items()))
        q, scales = L.quant(values[0], scheme, None if scale is None else values[scale],
                            None if scale_ub is None else values[scale_ub], spec.name,
                            zero_point=zero_point)
        return q if static else (q, scales)

    return _named(spec, signature, launch)


def _act_and_mul(spec: OpSpec) -> Callable[..., Any]:
    """The launcher of an act-and-mul op: one kernel template, the activation a code, the
    op's own scalars (before `up`, as in the native) its arguments."""
    signature, bind = native_binder(spec)
    own = [spec.param_names.index(p.name) for p in spec.own_scalars]
    up_at = spec.param_names.index("up")

    def launch(*args: Any, **kwargs: Any) -> Tensor:
        values = bind(args, kwargs)
        return L.act(spec.name, values[0], values[up_at],
                     scalars=tuple(float(values[i]) for i in own))[0]

    return _named(spec, signature, launch)


def _sparse_act_and_mul(spec: OpSpec) -> Callable[..., Any]:
    """The launcher of a sparse act-and-mul op (one program per row)."""
    signature, bind = native_binder(spec)

    def launch(*args: Any, **kwargs: Any) -> Tensor:
        x, std_multiplier, approximate, up = bind(args, kwargs)
        return L.sparse_act(spec.name, x, std_multiplier, approximate, up)

    return _named(spec, signature, launch)


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


def _check_groups(op: str, x: Tensor, scheme: QuantScheme) -> None:
    hidden = x.shape[-1] if x.dim() else 0
    if scheme.granularity == "group" and hidden % scheme.group_size:
        raise ValueError(
            f"{op}: group_size {scheme.group_size} does not divide hidden size {hidden}"
        )


# Each op's launcher, derived from its catalog spec's family (the norms written above).
_BY_FAMILY: dict[str, Callable[[OpSpec], Callable[..., Any]]] = {
    "quant": _unfused_quant, "act_and_mul": _act_and_mul,
    "sparse_act_and_mul": _sparse_act_and_mul,
}
_NORMS = {f.__name__: f for f in (rms_norm, fused_add_rms_norm, rms_norm_quant,
                                  fused_add_rms_norm_quant)}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    spec.name: _NORMS[spec.name] if spec.name in _NORMS
    else _act_and_mul_quant(spec.producer) if spec.fused and spec.producer is not None
    else _BY_FAMILY[spec.family](spec)
    for spec in SPECS.values()
}


def __getattr__(name: str) -> Callable[..., Any]:
    """`functions.<op>`: every op's launcher, the derived ones too."""
    try:
        return FUNCTIONS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
