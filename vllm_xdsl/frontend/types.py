"""Type conversion: the IR type of an FX value from its `node.meta["val"]`.

Tensors become builtin tensor types with `?` for symbolic sizes; SymInt/int scalars are
`i64`, SymFloat/float `f64`, SymBool/bool `i1`; a None result is `!torch.none_type`.
Objects only torch ops look into (torchbind script objects, their FakeScriptObject stand-ins
under fake mode, objects of registered opaque types) are `!torch.opaque<"class name">`:
the graph passes them through unchanged, so the type needs no more than the class name.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from xdsl.dialects.builtin import Float64Type, IntegerType, StringAttr
from xdsl.ir import Attribute

from vllm_xdsl.dialects.torch import NoneType, OpaqueType
from vllm_xdsl.dialects.types import UnsupportedDtypeError, tensor_type


class FrontendError(Exception):
    """The importer cannot represent an FX node exactly (the backend then falls back)."""


I64 = IntegerType(64)
I1 = IntegerType(1)
F64 = Float64Type()


def _dim(d: Any) -> int | None:
    if isinstance(d, int):
        return d
    # A SymInt that the shape env has pinned to a constant is still a static dim.
    expr = d.node.maybe_as_int() if hasattr(d.node, "maybe_as_int") else None
    return expr if isinstance(expr, int) else None


@functools.cache
def _tensor_type(dtype: torch.dtype, shape: tuple[int | None, ...]) -> Attribute:
    return tensor_type(dtype, shape)  # types are immutable: build each one once


def value_type(val: Any, what: str) -> Attribute:
    """The IR type of one FX value (FakeTensor, SymInt, ...); FrontendError if none fits."""
    if isinstance(val, torch.Tensor):
        try:
            return _tensor_type(val.dtype, tuple(_dim(d) for d in val.shape))
        except UnsupportedDtypeError as e:
            raise FrontendError(f"{what}: {e}") from None
    if isinstance(val, (bool, torch.SymBool)):
        return I1
    if isinstance(val, (int, torch.SymInt)):
        return I64
    if isinstance(val, (float, torch.SymFloat)):
        return F64
    if val is None:
        return NoneType()
    name = opaque_class_name(val)
    if name is not None:
        return _opaque_type(name)
    raise FrontendError(f"{what}: no IR type for a value of type {type(val).__name__}")


@functools.cache
def _opaque_type(name: str) -> OpaqueType:
    return OpaqueType(StringAttr(name))


def opaque_class_name(val: Any) -> str | None:
    """The class name torch knows an opaque object by, or None for any other value."""
    from torch._library.fake_class_registry import FakeScriptObject

    if isinstance(val, FakeScriptObject):  # a script object or opaque object under fake mode
        return str(val.script_class_name)
    if isinstance(val, torch.ScriptObject):
        return str(val._type().qualified_name())
    from torch._library.opaque_object import get_opaque_type_name, is_opaque_type

    if is_opaque_type(type(val)):
        return get_opaque_type_name(type(val))
    return None


def result_types(val: Any, what: str) -> tuple[list[Attribute], bool]:
    """The result types of a node and whether it returns a tuple (one result per element)."""
    if isinstance(val, (tuple, list)):
        return [value_type(v, f"{what}[{i}]") for i, v in enumerate(val)], True
    return [value_type(val, what)], False
