"""Build `torch.call` ops from Python: a small builder used by lower-dispatch.

`TorchBuilder.call("aten::mul.Tensor", a, b, shape=..., dtype=...)` creates one
`torch.call`: SSA values among the arguments become operands (`#torch.operand<i>`),
everything else becomes a literal attribute (`literal`). Ops are collected in `ops`
(in order) for the caller to insert; result types come from the shape/dtype given
or, by default, from the first tensor argument.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from vllm_xdsl.dialects.torch import CallOp, DtypeAttr, EnumAttr, NoneAttr, OperandRefAttr
from vllm_xdsl.dialects.types import ir_element_type, static_shape, tensor_type, torch_dtype

Shape = tuple[int | None, ...]


class Enum(str):
    """A torch enum member by its qualified name, e.g. Enum("torch.contiguous_format")."""


def literal(value: Any) -> Attribute:
    """The torch-dialect attribute of a Python argument value."""
    if isinstance(value, bool | int | str | torch.dtype) or value is None:
        kind: object = type(value)
        return _scalar_literal(kind, value)  # not floats: -0.0 == 0.0 as a key
    return _literal(value)


@functools.lru_cache(maxsize=4096)
def _scalar_literal(kind: object, value: Any) -> Attribute:
    """`literal` of a hashable non-float scalar, built once: attributes are immutable and
    the same few (dims, dtypes, flags) recur in every decomposition. `kind` keeps 1 and
    True apart."""
    return _literal(value)


def _literal(value: Any) -> Attribute:
    if value is None:
        return NoneAttr()
    if isinstance(value, bool):  # before int: bool is an int
        return IntegerAttr(int(value), IntegerType(1))
    if isinstance(value, int):
        return IntegerAttr(value, i64)
    if isinstance(value, float):
        return FloatAttr(value, f64)
    if isinstance(value, torch.dtype):
        return DtypeAttr(ir_element_type(value))
    if isinstance(value, Enum):
        return EnumAttr(StringAttr(str(value)))
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, list | tuple):
        return ArrayAttr([literal(v) for v in value])
    raise TypeError(f"no torch-dialect literal for {value!r}")


def meta(value: SSAValue) -> tuple[torch.dtype, Shape]:
    """dtype and shape (None for `?`) of a tensor-typed value."""
    t = value.type
    assert isinstance(t, TensorType), f"expected a tensor value, got {t}"
    return torch_dtype(t.element_type), static_shape(t)


def broadcast(a: Shape, b: Shape) -> Shape:
    """The broadcast of two shapes (None = unknown; an unknown dim against 1 stays unknown)."""
    out: list[int | None] = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        out.append(y if x == 1 else x if y == 1 else x if x is not None else y)
    return tuple(reversed(out))


@functools.cache
def _operand_ref(index: int) -> OperandRefAttr:
    return OperandRefAttr(IntAttr(index))  # immutable: one per index


@functools.lru_cache(maxsize=4096)
def _tensor_type(dtype: torch.dtype, shape: Shape) -> TensorType:
    return tensor_type(dtype, shape)  # immutable: build each type once (as the importer)


class TorchBuilder:
    """Collects `torch.call` ops computing a decomposition, with their result types."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self._converted: dict[tuple[SSAValue, torch.dtype], SSAValue] = {}

    def call(
        self,
        target: str,
        *args: Any,
        shape: Shape | None = None,
        dtype: torch.dtype | None = None,
        kwargs: dict[str, Any] | None = None,
        results: Sequence[Attribute] | None = None,
    ) -> SSAValue:
        """One torch.call; returns its (first) result. Tensor type: `dtype`/`shape` given,
        else those of the first tensor argument (shapes of several tensor arguments
        broadcast)."""
        inputs: list[SSAValue] = []

        def arg(v: Any) -> Attribute:
            if isinstance(v, SSAValue):
                inputs.append(v)
                return _operand_ref(len(inputs) - 1)
            if isinstance(v, list | tuple):
                return ArrayAttr([arg(x) for x in v])
            return literal(v)

        arg_attrs = [arg(a) for a in args]
        kw_attrs = {k: arg(v) for k, v in (kwargs or {}).items()}
        if results is None:
            tensors = [meta(v) for v in inputs if isinstance(v.type, TensorType)]
            if shape is None:
                shape = ()
                for _, s in tensors:
                    shape = broadcast(shape, s)
            if dtype is None:
                dtype = tensors[0][0]
            results = [_tensor_type(dtype, tuple(shape))]
        op = CallOp(target, inputs, arg_attrs, list(results), kw_attrs or None)
        self.ops.append(op)
        return op.results[0]

    def convert(self, value: SSAValue, dtype: torch.dtype) -> SSAValue:
        """`value.to(dtype)`: prims.convert_element_type, nothing if already of that dtype."""
        if meta(value)[0] == dtype:
            return value
        key = (value, dtype)
        if key not in self._converted:
            self._converted[key] = self.call("prims::convert_element_type.default", value, dtype,
                                             dtype=dtype)
        return self._converted[key]

