"""Argument templates of `torch.call` back to Python values (inverse of frontend/literals)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute

from vllm_xdsl.dialects.torch import DeviceAttr, DtypeAttr, EnumAttr, NoneAttr, OperandRefAttr
from vllm_xdsl.dialects.types import torch_dtype


class ExportError(Exception):
    """The IR holds something that has no torch counterpart."""


def resolve_named(path: str) -> Any:
    """A torch value by its dotted path: 'torch.contiguous_format', 'torch.ops.aten.add.Tensor'."""
    parts = path.split(".")
    if parts[0] != "torch":
        raise ExportError(f"#torch.enum<{path!r}> is not a torch value")
    obj: Any = torch
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def python_value(attr: Attribute, operand: Callable[[int], Any]) -> Any:
    """The Python value of an argument attribute; `operand(i)` gives SSA operand i's node."""
    if isinstance(attr, OperandRefAttr):
        return operand(attr.index.data)
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return bool(value) if attr.type.width.data == 1 else value
    if isinstance(attr, FloatAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, NoneAttr):
        return None
    if isinstance(attr, DtypeAttr):
        return torch_dtype(attr.element_type)
    if isinstance(attr, DeviceAttr):
        return torch.device(attr.value.data)
    if isinstance(attr, EnumAttr):
        return resolve_named(attr.value.data)
    if isinstance(attr, ArrayAttr):
        return [python_value(a, operand) for a in attr.data]
    raise ExportError(f"argument attribute {attr} has no Python value")
