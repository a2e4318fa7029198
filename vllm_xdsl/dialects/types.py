"""The one mapping between torch dtypes and xDSL builtin element types.

Every layer that crosses the torch/IR boundary (importer, exporter, dispatch metadata,
backends) uses these two functions, so a dtype is spelled the same way everywhere.
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

_TORCH_TO_IR: dict[torch.dtype, Attribute] = {
    torch.float16: Float16Type(),
    torch.bfloat16: BFloat16Type(),
    torch.float32: Float32Type(),
    torch.float64: Float64Type(),
    torch.float8_e4m3fn: Float8E4M3FNType(),
    torch.float8_e4m3fnuz: Float8E4M3FNUZType(),
    torch.float8_e5m2: Float8E5M2Type(),
    torch.int8: IntegerType(8),
    torch.uint8: IntegerType(8, Signedness.UNSIGNED),
    torch.int16: IntegerType(16),
    torch.int32: IntegerType(32),
    torch.int64: IntegerType(64),
    torch.bool: IntegerType(1),
}
_IR_TO_TORCH: dict[Attribute, torch.dtype] = {v: k for k, v in _TORCH_TO_IR.items()}


class UnsupportedDtypeError(ValueError):
    """A dtype or element type with no counterpart on the other side."""


def ir_element_type(dtype: torch.dtype) -> Attribute:
    """The builtin element type of a torch dtype (torch.bfloat16 -> bf16)."""
    try:
        return _TORCH_TO_IR[dtype]
    except KeyError:
        raise UnsupportedDtypeError(f"torch dtype {dtype} has no IR element type") from None


def torch_dtype(element_type: Attribute) -> torch.dtype:
    """The torch dtype of a builtin element type (bf16 -> torch.bfloat16)."""
    try:
        return _IR_TO_TORCH[element_type]
    except KeyError:
        raise UnsupportedDtypeError(f"element type {element_type} has no torch dtype") from None


def tensor_type(dtype: torch.dtype, shape: tuple[int | None, ...]) -> TensorType:
    """A builtin tensor type; None dims become `?`."""
    dims = [DYNAMIC_INDEX if d is None else d for d in shape]
    return TensorType(ir_element_type(dtype), dims)


def static_shape(t: TensorType) -> tuple[int | None, ...]:
    """The shape of a tensor type with `?` dims as None."""
    return tuple(None if d == DYNAMIC_INDEX else d for d in t.get_shape())
