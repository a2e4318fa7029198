"""The one converter between Python values and the attributes of a `torch.call`'s argument
template (`args`, `kwargs`): the importer, the lowering's builder, raise-native's matchers,
the exporter and the reference interpreter all read and write literals through it.

    Python                                          attribute
    None                                            #torch.none
    bool                                            i1 (true / false)
    int (in i64)                                    i64
    float                                           f64
    str                                             a string
    torch.dtype                                     #torch.dtype<bf16>
    torch.device                                    #torch.device<"cuda:0">
    a layout, memory format or op overload, Named   #torch.enum<"torch.contiguous_format">
    list / tuple                                    an array of the above
    an SSA operand (the caller says which)          #torch.operand<i>

`to_python(to_attr(v))` is `v` (tuples come back as lists, named values as the torch
objects they name).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from xdsl.dialects.builtin import (
    ArrayAttr,
    Float64Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
)
from xdsl.ir import Attribute

from vllm_xdsl.dialects.torch import DeviceAttr, DtypeAttr, EnumAttr, NoneAttr, OperandRefAttr
from vllm_xdsl.dialects.types import UnsupportedDtypeError, ir_element_type, torch_dtype

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_NONE = NoneAttr()


class LiteralError(ValueError):
    """A value with no attribute, or an attribute with no Python value (one line)."""


class Named(str):
    """A torch value by its dotted path, e.g. Named("torch.contiguous_format"): written as
    `#torch.enum<...>` (a plain str is a string)."""


def named_path(value: Any) -> str | None:
    """The dotted path by which torch names a layout, memory format or op overload."""
    if isinstance(value, (torch.layout, torch.memory_format)):
        return str(value)  # 'torch.strided', 'torch.contiguous_format'
    if isinstance(value, torch._ops.OpOverload):
        return f"torch.ops.{value.namespace}.{value._schema.name.split('::')[1]}.{value._overloadname}"
    return None


def resolve_named(path: str) -> Any:
    """A torch value by its dotted path: 'torch.contiguous_format', 'torch.ops.aten.add.Tensor'."""
    parts = path.split(".")
    if parts[0] != "torch":
        raise LiteralError(f"#torch.enum<{path!r}> is not a torch value")
    obj: Any = torch
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


# Attributes are immutable and verified on construction: building each distinct literal
# once keeps the importer and the lowering fast on large graphs.
@functools.cache
def operand_ref(index: int) -> OperandRefAttr:
    """`#torch.operand<index>`."""
    return OperandRefAttr(IntAttr(index))


@functools.cache
def _scalar(value: bool | int | float | str, kind: str) -> Attribute:
    # Keyed by the type's name too: True, 1 and 1.0 are equal keys.
    if kind == "bool":
        return IntegerAttr(int(value), IntegerType(1))
    if kind == "str":
        return StringAttr(str(value))
    if kind == "int":
        return IntegerAttr(int(value), IntegerType(64))
    return FloatAttr(float(value), Float64Type())


@functools.cache
def _dtype(dtype: torch.dtype) -> DtypeAttr:
    return DtypeAttr(ir_element_type(dtype))


def to_attr(value: Any, operand: Callable[[Any], int | None] | None = None) -> Attribute:
    """The attribute of one argument value. `operand(v)`, where given, is the operand index
    of a value the caller passes as an SSA operand (an FX node, an SSA value), else None.
    LiteralError for a value with no attribute."""
    kind = type(value)
    if kind in (bool, int, float, str):
        if kind is int and not _I64_MIN <= value <= _I64_MAX:
            raise LiteralError(f"integer {value} does not fit in i64")
        # -0.0 and 0.0 (and nan) are equal keys or unhashable-equal: build those fresh.
        if kind is float and (value == 0.0 or value != value):
            return FloatAttr(value, Float64Type())
        return _scalar(value, kind.__name__)
    if value is None:
        return _NONE
    if operand is not None and (index := operand(value)) is not None:
        return operand_ref(index)
    if isinstance(value, torch.dtype):
        try:
            return _dtype(value)
        except UnsupportedDtypeError as e:
            raise LiteralError(str(e)) from None
    if isinstance(value, (list, tuple)):
        return ArrayAttr([to_attr(v, operand) for v in value])
    if isinstance(value, Named):
        return EnumAttr(StringAttr(str(value)))
    if isinstance(value, torch.device):
        return DeviceAttr(StringAttr(str(value)))
    name = named_path(value)
    if name is not None:
        return EnumAttr(StringAttr(name))
    raise LiteralError(f"cannot represent argument {value!r} ({kind.__name__})")


def to_python(attr: Attribute, operand: Callable[[int], Any], resolve: bool = True) -> Any:
    """The Python value of one argument attribute; `operand(i)` gives what
    `#torch.operand<i>` stands for. With `resolve=False` (matchers, which compare them as
    they are) devices, named torch values, dtypes torch lacks and any other attribute stay
    attributes; otherwise those are resolved, and LiteralError if one cannot be."""
    if isinstance(attr, OperandRefAttr):
        return operand(attr.index.data)
    if isinstance(attr, IntegerAttr):
        width = attr.type.width.data if isinstance(attr.type, IntegerType) else 64
        return bool(attr.value.data) if width == 1 else attr.value.data
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, NoneAttr):
        return None
    if isinstance(attr, ArrayAttr):
        return [to_python(a, operand, resolve) for a in attr.data]
    if isinstance(attr, DtypeAttr):
        try:
            return torch_dtype(attr.element_type)
        except UnsupportedDtypeError as e:
            if not resolve:
                return attr
            raise LiteralError(str(e)) from None
    if not resolve:
        return attr
    if isinstance(attr, DeviceAttr):
        return torch.device(attr.value.data)
    if isinstance(attr, EnumAttr):
        return resolve_named(attr.value.data)
    raise LiteralError(f"argument attribute {attr} has no Python value")


__all__ = ["LiteralError", "Named", "named_path", "operand_ref", "resolve_named", "to_attr",
           "to_python"]
