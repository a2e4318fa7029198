"""Literal arguments of FX nodes as attributes of the `torch.call` argument template.

Nodes become `#torch.operand<i>` (operands are numbered in order of first use); Python
literals become attributes that the exporter turns back into the same Python values:
ints `i64`, floats `f64`, bools `i1`, strings, None, dtypes, devices, and named torch
values (layouts, memory formats, op overloads) as `#torch.enum<"dotted.path">`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    Float64Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
)
from xdsl.ir import Attribute

from vllm_xdsl.dialects.torch import DeviceAttr, DtypeAttr, EnumAttr, NoneAttr, OperandRefAttr
from vllm_xdsl.dialects.types import UnsupportedDtypeError, ir_element_type
from vllm_xdsl.frontend.types import FrontendError

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _named(value: Any) -> str | None:
    """The dotted path by which torch names a layout, memory format or op overload."""
    if isinstance(value, (torch.layout, torch.memory_format)):
        return str(value)  # 'torch.strided', 'torch.contiguous_format'
    if isinstance(value, torch._ops.OpOverload):
        return f"torch.ops.{value.namespace}.{value._schema.name.split('::')[1]}.{value._overloadname}"
    return None


# Attributes are immutable and verified on construction: building each distinct literal
# once keeps the importer fast on large graphs.
@functools.cache
def _operand_ref(index: int) -> OperandRefAttr:
    return OperandRefAttr(IntAttr(index))


@functools.cache
def _scalar(value: bool | int | float | str, kind: str) -> Attribute:
    # Keyed by the type's name too: True, 1 and 1.0 are equal keys.
    if kind == "bool":
        return BoolAttr.from_bool(bool(value))
    if isinstance(value, str):
        return StringAttr(value)
    if kind == "int":
        return IntegerAttr(int(value), IntegerType(64))
    return FloatAttr(float(value), Float64Type())


@functools.cache
def _dtype(dtype: torch.dtype) -> DtypeAttr:
    return DtypeAttr(ir_element_type(dtype))


_NONE = NoneAttr()


def literal(value: Any, operand: Callable[[torch.fx.Node], int], what: str) -> Attribute:
    """The attribute of one argument; `operand(node)` gives a node's operand index."""
    if isinstance(value, torch.fx.Node):
        return _operand_ref(operand(value))
    kind = type(value)
    if kind is int and not _I64_MIN <= value <= _I64_MAX:
        raise FrontendError(f"{what}: integer {value} does not fit in i64")
    if kind in (bool, int, float, str):
        # -0.0 and 0.0 (and nan) are equal keys or unhashable-equal: build those fresh.
        if kind is float and (value == 0.0 or value != value):
            return FloatAttr(value, Float64Type())
        return _scalar(value, kind.__name__)
    if value is None:
        return _NONE
    if isinstance(value, torch.dtype):
        try:
            return _dtype(value)
        except UnsupportedDtypeError as e:
            raise FrontendError(f"{what}: {e}") from None
    if isinstance(value, torch.device):
        return DeviceAttr(StringAttr(str(value)))
    if isinstance(value, (list, tuple)):
        return ArrayAttr([literal(v, operand, what) for v in value])
    name = _named(value)
    if name is not None:
        return EnumAttr(StringAttr(name))
    raise FrontendError(f"{what}: cannot represent argument {value!r} ({type(value).__name__})")
