"""The one mapping between element types: the core's DType, torch dtypes and xDSL builtin
element types.

Every layer that crosses the torch/IR boundary (importer, exporter, dispatch metadata,
backends) uses these functions, so a dtype is spelled the same way everywhere. The table is
keyed by torch's attribute names, not by torch dtypes, so that importing a dialect does not
import torch (the verifiers read element types as DTypes); `torch_dtype` imports it when
first called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

from vllm_xdsl.core.dtypes import DType

if TYPE_CHECKING:
    import torch

# torch's name of a dtype (`torch.<name>`) -> its element type.
_IR_OF_NAME: dict[str, Attribute] = {
    "float16": Float16Type(),
    "bfloat16": BFloat16Type(),
    "float32": Float32Type(),
    "float64": Float64Type(),
    "float8_e4m3fn": Float8E4M3FNType(),
    "float8_e4m3fnuz": Float8E4M3FNUZType(),
    "float8_e5m2": Float8E5M2Type(),
    "int8": IntegerType(8),
    "uint8": IntegerType(8, Signedness.UNSIGNED),
    "int16": IntegerType(16),
    "int32": IntegerType(32),
    "int64": IntegerType(64),
    "bool": IntegerType(1),
}
_NAME_OF_IR: dict[Attribute, str] = {v: k for k, v in _IR_OF_NAME.items()}
_DTYPE_OF: dict[Attribute, DType] = {_IR_OF_NAME[d.torch_name]: d for d in DType}
_TORCH_OF: dict[Attribute, torch.dtype] = {}  # filled on first use (torch_dtype)


class UnsupportedDtypeError(ValueError):
    """A dtype or element type with no counterpart on the other side."""


def dtype_of(element_type: Attribute) -> DType | None:
    """The DType of an element type (bf16 -> DType.BF16), None for one the ops do not use."""
    return _DTYPE_OF.get(element_type)


def element_type(dtype: DType) -> Attribute:
    """The builtin element type of a DType."""
    return _IR_OF_NAME[dtype.torch_name]


def ir_element_type(dtype: torch.dtype) -> Attribute:
    """The builtin element type of a torch dtype (torch.bfloat16 -> bf16)."""
    found = _IR_OF_NAME.get(str(dtype).removeprefix("torch."))
    if found is None:
        raise UnsupportedDtypeError(f"torch dtype {dtype} has no IR element type")
    return found


def torch_dtype(element_type: Attribute) -> torch.dtype:
    """The torch dtype of a builtin element type (bf16 -> torch.bfloat16)."""
    found = _TORCH_OF.get(element_type)
    if found is None:
        name = _NAME_OF_IR.get(element_type)
        if name is None:
            raise UnsupportedDtypeError(f"element type {element_type} has no torch dtype")
        import torch

        found = _TORCH_OF[element_type] = getattr(torch, name)
    return found


def tensor_type(dtype: torch.dtype, shape: tuple[int | None, ...]) -> TensorType:
    """A builtin tensor type; None dims become `?`."""
    dims = [DYNAMIC_INDEX if d is None else d for d in shape]
    return TensorType(ir_element_type(dtype), dims)


def static_shape(t: TensorType) -> tuple[int | None, ...]:
    """The shape of a tensor type with `?` dims as None."""
    return tuple(None if d == DYNAMIC_INDEX else d for d in t.get_shape())
