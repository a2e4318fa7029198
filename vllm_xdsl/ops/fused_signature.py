"""A fused op's flat quant scheme: the one adaptor between its custom-op signature and a
QuantScheme.

Custom-op schemas cannot hold a QuantScheme, so a fused op takes its scheme as the separate
parameters of core.catalog.SCHEME_PARAMS. Each implementation (the native, the Triton
launchers, the CUDA/HIP ops) is written once against the scheme instead:

    @flat_fused("rms_norm_quant")
    def rms_norm_quant(x, weight, epsilon, scheme, scale, scale_ub, zero_point): ...

`flat_fused` returns the function with the op's flat signature, derived from its catalog
spec (real annotations: torch infers custom-op schemas from it), which binds a call, builds
and validates the scheme once and calls the body with the producer's own arguments in the
spec's order, then `scheme, scale, scale_ub, zero_point`. `FlatLayout.flat_args` is the way
back, for calling a flat op with a scheme. A new fused op (a quant variant, an act-and-mul)
is a catalog declaration and one body per implementation; no flat signature is written.

Annotations are real (no `from __future__ import annotations`).
"""

import inspect
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from operator import itemgetter
from typing import Any

import torch
from torch import Tensor

from vllm_xdsl.core.catalog import REQUIRED, SCHEME_FIELDS, SCHEME_TENSORS, SPECS, OpSpec, Param
from vllm_xdsl.core.dtypes import DType
from vllm_xdsl.core.scheme import QuantScheme, granularity_of
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.ops.dtypes import to_torch


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


def cached_scheme_of(
    op: str, scale: Tensor | None, scale_ub: Tensor | None, *fields: Any
) -> QuantScheme:
    """`scheme_of`, cached on plain values (a decode-sized launch must not pay for building
    and validating a scheme); errors are not cached and re-raise each call."""
    return _cached_scheme(op, scale is not None, scale_ub is not None, *fields)


_GIVEN = torch.empty(0)  # stands for "a tensor was passed": scheme_of only tests for None


@lru_cache(maxsize=1024)
def _cached_scheme(op: str, has_scale: bool, has_scale_ub: bool, *fields: Any) -> QuantScheme:
    return scheme_of(op, _GIVEN if has_scale else None, _GIVEN if has_scale_ub else None,
                     *fields)


# How the body gets its scheme: (op, scale, scale_ub, zero_point, the SCHEME_FIELDS values).
Build = Callable[[str, Tensor | None, Tensor | None, Tensor | None, tuple[Any, ...]],
                 QuantScheme]


def build_scheme(op: str, scale: Tensor | None, scale_ub: Tensor | None,
                 zero_point: Tensor | None, fields: tuple[Any, ...]) -> QuantScheme:
    """The natives' Build: scheme_of (the zero point is the quant's to check)."""
    return scheme_of(op, scale, scale_ub, *fields)


_TYPES: dict[str, Any] = {"tensor": Tensor, "float": float, "int": int, "bool": bool,
                          "str": str, "dtype": torch.dtype}
_MISSING = inspect.Parameter.empty


def _annotation(p: Param) -> Any:
    t = _TYPES[p.kind]
    return t | None if p.optional else t


def _default(p: Param) -> Any:
    if p.default is REQUIRED:
        return _MISSING
    return to_torch(p.default) if isinstance(p.default, DType) else p.default


def _getter(indices: Sequence[int]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """values -> the tuple of values at `indices` (itemgetter returns a bare item for one)."""
    if len(indices) == 1:
        (i,) = indices
        return lambda values: (values[i],)
    return itemgetter(*indices)


class FlatLayout:
    """Where a fused op's flat parameters are: its own, the scheme's fields and tensors."""

    def __init__(self, spec: OpSpec) -> None:
        names = spec.param_names
        if not spec.fused or not set(SCHEME_FIELDS + SCHEME_TENSORS) <= set(names):
            raise ValueError(f"{spec.name} is not a fused op: it has no flat quant scheme")
        self.op = spec.name
        self.own: tuple[str, ...] = tuple(
            n for n in names if n not in SCHEME_FIELDS and n not in SCHEME_TENSORS)
        self.parameters = tuple(
            inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              default=_default(p), annotation=_annotation(p))
            for p in spec.params)
        self._count = len(names)
        self._required = sum(p.default is _MISSING for p in self.parameters)
        self._defaults = tuple(p.default for p in self.parameters)
        self._index = {n: i for i, n in enumerate(names)}
        self.own_values = _getter([self._index[n] for n in self.own])
        self.fields = _getter([self._index[n] for n in SCHEME_FIELDS])
        self.tensors = _getter([self._index[n] for n in SCHEME_TENSORS])

    def signature(self, returns: Any) -> inspect.Signature:
        return inspect.Signature(self.parameters, return_annotation=returns)

    def bind(self, signature: inspect.Signature, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Sequence[Any]:
        """Every parameter's value, in order (defaults filled in); Python's TypeError for a
        call that does not fit `signature`."""
        n = len(args)
        if not kwargs and self._required <= n <= self._count:
            return args + self._defaults[n:]  # (flat inlines this common case)
        if n <= self._count:
            values = [*args, *self._defaults[n:]]
            for name, value in kwargs.items():
                i = self._index.get(name, -1)
                if i < n:  # unknown, or given twice
                    break
                values[i] = value
            else:
                if all(v is not _MISSING for v in values[n:self._required]):
                    return values
        bound = signature.bind(*args, **kwargs)  # raises the TypeError
        raise AssertionError(f"{self.op}: {bound} should not bind")  # pragma: no cover

    def flat_args(self, own: Sequence[Any], scheme: QuantScheme, scale: Tensor | None,
                  scale_ub: Tensor | None, zero_point: Tensor | None) -> tuple[Any, ...]:
        """The flat arguments, in order, of the op's own values and a scheme (what
        `scheme_of` rebuilds that scheme from)."""
        by_name = {**dict(zip(self.own, own, strict=True)),
                   **{n: _FIELD_VALUE.get(n, getattr)(scheme, n) for n in SCHEME_FIELDS},
                   **dict(zip(SCHEME_TENSORS, (scale, scale_ub, zero_point), strict=True))}
        return tuple(by_name[p.name] for p in self.parameters)


# The flat fields that are not QuantScheme attributes of the same name and type.
_FIELD_VALUE: dict[str, Callable[[QuantScheme, str], Any]] = {
    "quant_dtype": lambda scheme, _: scheme.dtype,
    "variant": lambda scheme, _: scheme.variant.spelling(),
}


@cache
def layout(op: str | OpSpec) -> FlatLayout:
    """The layout of a fused op (its catalog name, or a spec)."""
    return FlatLayout(SPECS[op] if isinstance(op, str) else op)


_BODY_TAIL = ("scheme", *SCHEME_TENSORS)


def flat_fused(
    spec: str | OpSpec, *, build: Build = build_scheme, name: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the flat-signature function of a fused op (catalog name or spec) calling
    `body`.

    `body` takes the op's own parameters (the catalog's, in order), then `scheme, scale,
    scale_ub, zero_point`; `build` makes the scheme (and raises for one it cannot run); the
    result is named `name` (default: the op) and returns what `body` is annotated to.
    `__wrapped__` is the body, so the tuning cache hashes the body's source and its
    package (tune/cache.py); `__signature__` stops inspect.signature from following it."""
    lay = layout(spec)
    op = lay.op
    want = (*lay.own, *_BODY_TAIL)

    def decorate(body: Callable[..., Any]) -> Callable[..., Any]:
        body_sig = inspect.signature(body)
        if tuple(body_sig.parameters) != want:
            raise TypeError(f"{op}: a flat_fused body takes {want}, not "
                            f"{tuple(body_sig.parameters)}")
        signature = lay.signature(body_sig.return_annotation)
        bind, own, fields, tensors = lay.bind, lay.own_values, lay.fields, lay.tensors
        required, count, defaults = lay._required, lay._count, lay._defaults

        def flat(*args: Any, **kwargs: Any) -> Any:
            # A positional call binds inline (a decode-sized launch pays for every frame).
            values: Sequence[Any]
            if not kwargs and required <= len(args) <= count:
                values = args + defaults[len(args):]
            else:
                values = bind(signature, args, kwargs)
            scale, scale_ub, zero_point = tensors(values)
            scheme = build(op, scale, scale_ub, zero_point, fields(values))
            return body(*own(values), scheme, scale, scale_ub, zero_point)

        flat.__name__ = flat.__qualname__ = name or op
        flat.__module__ = body.__module__
        flat.__doc__ = body.__doc__
        flat.__dict__["__signature__"] = signature
        flat.__dict__["__wrapped__"] = body
        flat.__annotations__ = {p.name: p.annotation for p in lay.parameters}
        flat.__annotations__["return"] = body_sig.return_annotation
        return flat

    return decorate
