"""IR element types as the core's DType, without torch: what the dialect verifiers read.

dialects/types.py maps element types to torch dtypes for the layers that hold tensors; the
verifiers only need to know which of the ops' element types a type is, so importing a
dialect does not import torch.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
)
from xdsl.ir import Attribute

from vllm_xdsl.core.dtypes import DType

_IR_OF: dict[DType, Attribute] = {
    DType.F64: Float64Type(),
    DType.F32: Float32Type(),
    DType.F16: Float16Type(),
    DType.BF16: BFloat16Type(),
    DType.F8E4M3FN: Float8E4M3FNType(),
    DType.F8E4M3FNUZ: Float8E4M3FNUZType(),
    DType.I8: IntegerType(8),
    DType.I32: IntegerType(32),
    DType.I64: IntegerType(64),
}
_DTYPE_OF: dict[Attribute, DType] = {t: d for d, t in _IR_OF.items()}


def dtype_of(element_type: Attribute) -> DType | None:
    """The DType of an element type (bf16 -> DType.BF16), None for one the ops do not use."""
    return _DTYPE_OF.get(element_type)


def element_type(dtype: DType) -> Attribute:
    """The builtin element type of a DType."""
    return _IR_OF[dtype]
