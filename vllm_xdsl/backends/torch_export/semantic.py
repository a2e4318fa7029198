"""Semantic ops back to torch: `vllm.<op>` -> `torch.ops.vllm_xdsl.<op>`, a provider op
`<provider>.<op>` -> `torch.ops.vllm_xdsl_<provider>.<op>`, with the native's arguments.

Provider torch ops are resolved at export time (their backends register them when
imported), so a missing one is a clear ExportError naming the op and provider.
Implementation properties (block_size, vec_width, ...) are the kernel's business and are
not torch arguments.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute, SSAValue

from vllm_xdsl.dialects.types import torch_dtype
from vllm_xdsl.dialects.vllm import (
    FusedQuantOp,
    PerTokenGroupFp8QuantSignature,
    QuantOp,
    RmsNormSignature,
    SemanticSignature,
    has_rounded_sum,
)

from .literals import ExportError

# Where each provider registers its torch ops (imported on first use), in order.
PROVIDER_MODULES = ("vllm_xdsl.backends.{}.torch_ops", "vllm_xdsl.backends.{}")
# The rocm kernels share the cuda sources and op definitions (torch_ops.define("rocm")).
_MODULE_OF = {"rocm": "vllm_xdsl.backends.cuda.torch_ops"}


def provider_of(op: SemanticSignature) -> str:
    return op.name.split(".", 1)[0]


def torch_overload(op: SemanticSignature) -> torch._ops.OpOverload:
    """The torch op a semantic or provider op calls."""
    provider = provider_of(op)
    name = op.SEMANTIC_NAME
    namespace = "vllm_xdsl" if provider == "vllm" else f"vllm_xdsl_{provider}"
    if provider == "vllm":
        import vllm_xdsl.ops  # noqa: F401  (registers torch.ops.vllm_xdsl)
    packet = _find(namespace, name)
    if packet is None and provider != "vllm":
        _load(provider)
        packet = _find(namespace, name)
    if packet is None:
        raise ExportError(
            f"{op.name}: torch op {namespace}::{name} is not registered "
            f"(is the {provider} backend installed and importable?)"
        )
    return packet.default


def _find(namespace: str, name: str) -> Any:
    try:
        return getattr(getattr(torch.ops, namespace), name)
    except (AttributeError, RuntimeError):
        return None


def _load(provider: str) -> None:
    candidates = [_MODULE_OF[provider]] if provider in _MODULE_OF else []
    for name in candidates + [p.format(provider) for p in PROVIDER_MODULES]:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        # cuda/rocm register their ops per vendor on demand: torch_ops.define(vendor).
        define = getattr(module, "define", None)
        if callable(define):
            define(provider)
        return


def _scheme_args(op: QuantOp) -> dict[str, Any]:
    scheme = op.quant_scheme()
    return {
        "quant_dtype": scheme.dtype,
        "static": scheme.static,
        "granularity": scheme.granularity,
        "group_size": scheme.group_size,
        "column_major_scales": scheme.column_major_scales,
        "use_ue8m0": scheme.use_ue8m0,
        "group_eps": scheme.group_eps,
    }


def native_arguments(
    op: SemanticSignature, operand: Callable[[SSAValue], Any], epsilon: Any
) -> dict[str, Any]:
    """The native's arguments by name; `operand(value)` gives an SSA value's node and
    `epsilon` is what to pass for epsilon (the property value or a runtime node)."""
    from vllm_xdsl import ops

    args: dict[str, Any] = {}
    for name in ops.ALL_OPS[op.SEMANTIC_NAME].signature.parameters:
        if name == "epsilon":
            args[name] = epsilon
        elif name in ("fp8_dtype",) and isinstance(op, QuantOp):
            args[name] = torch_dtype(op.q.type.element_type)
        elif name in _SCHEME_PARAMETERS and isinstance(op, FusedQuantOp):
            args[name] = _scheme_args(op)[name]
        elif name in _GROUP_PARAMETERS and isinstance(op, PerTokenGroupFp8QuantSignature):
            # The group options (the scheme has their defaults applied).
            args[name] = _scheme_args(op)[_GROUP_PARAMETERS[name]]
        elif name == "variance_size" and isinstance(op, RmsNormSignature):
            args[name] = None if op.variance_size is None else op.variance_size.value.data
        elif name == "rounded_sum":
            args[name] = has_rounded_sum(op)
        elif name == "variant" and isinstance(op, QuantOp):
            args[name] = op.quant_scheme().variant.spelling()
        elif name in type(op).get_irdl_definition().properties:
            # A plain scalar property (f64 or string), absent = the native's default.
            attr = op.properties.get(name)
            default = ops.ALL_OPS[op.SEMANTIC_NAME].signature.parameters[name].default
            args[name] = default if attr is None else _scalar_value(attr)
        else:  # a tensor operand (x, residual, weight, scale, scale_ub), maybe absent
            # Operands are named as the native's parameters (OPS.md): looked up by name.
            value = getattr(op, name)
            args[name] = None if value is None else operand(value)
    return args


def _scalar_value(attr: Attribute) -> Any:
    if isinstance(attr, FloatAttr | IntegerAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    raise ValueError(f"property {attr} has no Python value")


# The fused ops' scheme parameters; the per-group quant's, as scheme fields.
_SCHEME_PARAMETERS = ("quant_dtype", "static", "granularity", "group_size",
                      "column_major_scales", "use_ue8m0", "group_eps")
_GROUP_PARAMETERS = {"group_size": "group_size", "column_major_scales": "column_major_scales",
                     "use_ue8m0": "use_ue8m0", "eps": "group_eps"}


def result_indices(op: SemanticSignature) -> list[int]:
    """For each IR result of the op, the index of that output in the torch op's results."""
    from vllm_xdsl import ops

    outputs = ops.ALL_OPS[op.SEMANTIC_NAME].outputs
    names = [name for name, _ in type(op).get_irdl_definition().results]
    present = [name for name in names if getattr(op, name) is not None]
    return [outputs.index(name) for name in present]
