"""An IR op's arguments in the native signature of its semantic op.

`native_args(op, value_of)` binds every parameter of the native function: operands
through `value_of` (TensorMeta for dispatch, tensors for evaluation), and everything the
native takes as a Python value from the op's properties, its quant scheme and its result
types (`fp8_dtype` / `quant_dtype` = the element type of `q`).

A runtime epsilon (operand `epsilon_value`, a 0-d f64 tensor or an f64 scalar) reaches
`supports_args` as TensorMeta(float64, (), device): what eager dispatch gives for the 0-d
float64 tensor that Dynamo passes for a float module attribute. An implementation that
needs a Python float can reject it by type; its value is unknown at compile time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue

from vllm_xdsl.dialects.types import static_shape, torch_dtype
from vllm_xdsl.dialects.vllm import (
    NormOp,
    QuantOp,
    RmsNormSignature,
    SemanticSignature,
    has_rounded_sum,
)
from vllm_xdsl.ops import ALL_OPS, TensorMeta

# Native parameter -> QuantScheme field (unfused per-group names and fused names).
_SCHEME_FIELDS = {
    "quant_dtype": "dtype",
    "fp8_dtype": "dtype",
    "static": "static",
    "granularity": "granularity",
    "group_size": "group_size",
    "column_major_scales": "column_major_scales",
    "use_ue8m0": "use_ue8m0",
    "eps": "group_eps",
    "group_eps": "group_eps",
}
_TENSOR_OPERANDS = ("x", "up", "residual", "weight", "scale", "scale_ub", "zero_point")


def native_args(op: Operation, value_of: Callable[[SSAValue], Any]) -> dict[str, Any]:
    """The native function's arguments of `op`, by parameter name (defaults not applied)."""
    assert isinstance(op, SemanticSignature)
    semantic = ALL_OPS[op.SEMANTIC_NAME]
    scheme = op.quant_scheme() if isinstance(op, QuantOp) else None
    args: dict[str, Any] = {}
    for name in semantic.signature.parameters:
        if name in _TENSOR_OPERANDS and _is_operand(op, name):
            # Operands are named as the native's parameters (OPS.md): looked up by name.
            v = getattr(op, name)
            args[name] = None if v is None else value_of(v)
        elif name == "epsilon" and isinstance(op, NormOp):
            eps = op.epsilon_arg()
            args[name] = value_of(eps) if isinstance(eps, SSAValue) else eps
        elif name == "variance_size" and isinstance(op, RmsNormSignature):
            size = op.variance_size
            args[name] = None if size is None else size.value.data
        elif name == "rounded_sum":
            args[name] = has_rounded_sum(op)
        elif scheme is not None and name in _SCHEME_FIELDS:
            args[name] = getattr(scheme, _SCHEME_FIELDS[name])
        elif scheme is not None and name == "variant":
            args[name] = scheme.variant.spelling()
        elif name in type(op).get_irdl_definition().properties:
            # A plain scalar property (f64, i64, string): its value, or the native's default.
            args[name] = _property_value(op, name, semantic.signature.parameters[name].default)
        else:
            raise AssertionError(f"{op.name}: no IR source for native parameter {name!r}")
    return args


def _property_value(op: Operation, name: str, default: Any) -> Any:
    attr = op.properties.get(name)
    if attr is None:
        return default
    if isinstance(attr, FloatAttr | IntegerAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    raise AssertionError(f"{op.name}: property {name} = {attr} has no native value")


def _is_operand(op: SemanticSignature, name: str) -> bool:
    return name in {n for n, _ in type(op).get_irdl_definition().operands}


def meta_of(value: SSAValue, device: str) -> TensorMeta:
    """TensorMeta of an operand; an f64 scalar (runtime epsilon) as a 0-d float64 tensor."""
    t = value.type
    if isinstance(t, TensorType):
        return TensorMeta(torch_dtype(t.element_type), static_shape(t), device)
    return TensorMeta(torch.float64, (), device)


def meta_args(op: Operation, device: str) -> dict[str, Any]:
    """What `supports_args` sees for `op` when lowering for a target with `device`."""
    return native_args(op, lambda v: meta_of(v, device))

