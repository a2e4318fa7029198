"""Build `torch.call` ops from Python: a small builder used by lower-dispatch.

`TorchBuilder.call("aten::mul.Tensor", a, b, shape=..., dtype=...)` creates one
`torch.call`: SSA values among the arguments become operands (`#torch.operand<i>`),
everything else becomes a literal attribute (dialects/torch_literals.py). Ops are collected in `ops`
(in order) for the caller to insert; result types come from the shape/dtype given
or, by default, from the first tensor argument.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.dialects.torch_literals import Named, to_attr
from vllm_xdsl.dialects.types import static_shape, tensor_type, torch_dtype

Shape = tuple[int | None, ...]


# A torch enum member by its qualified name, e.g. Enum("torch.contiguous_format").
Enum = Named


def literal(value: Any) -> Attribute:
    """The torch-dialect attribute of a Python argument value (no SSA values)."""
    return to_attr(value)


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

        def operand(v: Any) -> int | None:  # each SSA argument is an operand of its own
            if not isinstance(v, SSAValue):
                return None
            inputs.append(v)
            return len(inputs) - 1

        arg_attrs = [to_attr(a, operand) for a in args]
        kw_attrs = {k: to_attr(v, operand) for k, v in (kwargs or {}).items()}
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

