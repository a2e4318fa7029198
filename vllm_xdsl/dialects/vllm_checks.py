"""Verifier checks shared by the `vllm` dialect and the provider dialects.

Each check raises a VerifyException whose message names the operand or result that is
wrong and says what was expected, so `vllm-opt` can point at the op with a clear line.
Dimensions that are dynamic (`?`) are not checked against static ones.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    FloatAttr,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.core.dtypes import ACTIVATION, DType
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.dialects.types import dtype_of

ACTIVATION_DTYPES: tuple[DType, ...] = ACTIVATION
FP8_ELEMENT_TYPES = (Float8E4M3FNType, Float8E4M3FNUZType)


def tensor_of(value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{what} must be a tensor, got {value.type}")
    return value.type


def dims_agree(a: int, b: int) -> bool:
    return a == DYNAMIC_INDEX or b == DYNAMIC_INDEX or a == b


def shapes_agree(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Same rank, and every pair of dims equal or dynamic."""
    return len(a) == len(b) and all(dims_agree(x, y) for x, y in zip(a, b, strict=True))


def activation(value: SSAValue, what: str = "x") -> TensorType:
    """An activation: rank >= 1, f16/bf16/f32."""
    t = tensor_of(value, what)
    if t.get_num_dims() < 1:
        raise VerifyException(f"{what} must have rank >= 1 (hidden size last), got {t}")
    dtype = dtype_of(t.element_type)
    if dtype not in ACTIVATION_DTYPES:
        raise VerifyException(
            f"{what} must have element type f16, bf16 or f32, got {t.element_type}"
        )
    return t


def hidden_size(t: TensorType) -> int:
    return t.get_shape()[-1]


def same_shape(
    value: SSAValue, like: TensorType, what: str, element_type: Attribute | None
) -> None:
    """`value` has the shape of `like`, and `element_type` if given."""
    t = tensor_of(value, what)
    shape, ref = t.get_shape(), like.get_shape()
    if not shapes_agree(shape, ref):
        raise VerifyException(f"{what} must have the shape of x {_shape(like)}, got {_shape(t)}")
    if element_type is not None and t.element_type != element_type:
        raise VerifyException(f"{what} must have element type {element_type}, got {t.element_type}")


def weight(value: SSAValue | None, x: TensorType) -> None:
    """A norm weight of shape [H]; its dtype may differ from x (Gemma-style)."""
    if value is None:
        return
    t = tensor_of(value, "weight")
    if t.get_num_dims() != 1:
        raise VerifyException(f"weight must have rank 1, got {t}")
    if not dims_agree(t.get_shape()[0], hidden_size(x)):
        raise VerifyException(
            f"weight size {_dim(t.get_shape()[0])} does not match the hidden size "
            f"{_dim(hidden_size(x))} of x"
        )
    if not isinstance(t.element_type, AnyFloat):
        raise VerifyException(f"weight must have a float element type, got {t.element_type}")


def epsilon(prop: FloatAttr | None, operand: SSAValue | None) -> None:
    """Epsilon is exactly one of: an f64 property, a runtime scalar operand."""
    if (prop is None) == (operand is None):
        raise VerifyException(
            "epsilon must be given exactly once: as the `epsilon` property or as a runtime operand"
        )
    if prop is not None and prop.value.data < 0:
        raise VerifyException(f"epsilon must be >= 0, got {prop.value.data}")
    if operand is not None:
        t = operand.type
        scalar = isinstance(t, AnyFloat) or (
            isinstance(t, TensorType)
            and t.get_num_dims() == 0
            and isinstance(t.element_type, AnyFloat)
        )
        if not scalar:
            raise VerifyException(f"runtime epsilon must be a float scalar or 0-d tensor, got {t}")


def static_scale(value: SSAValue, what: str = "scale") -> None:
    """A static dequantization scale: a float tensor of shape [1]."""
    t = tensor_of(value, what)
    if t.get_shape() != (1,) or not isinstance(t.element_type, AnyFloat):
        raise VerifyException(f"{what} must be a float tensor of shape [1], got {t}")


def quant_result(value: SSAValue, x: TensorType, allowed: str) -> DType:
    """A quantized result shaped like x; `allowed` is 'fp8', 'int8' or 'fp8 or int8'."""
    t = tensor_of(value, "q")
    same_shape(value, x, "q", None)
    et = t.element_type
    is_fp8 = isinstance(et, FP8_ELEMENT_TYPES)
    is_int8 = isinstance(et, IntegerType) and et.width.data == 8
    if not ((is_fp8 and "fp8" in allowed) or (is_int8 and "int8" in allowed)):
        raise VerifyException(f"quantized result q must be {allowed}, got element type {et}")
    dtype = dtype_of(et)
    assert dtype is not None  # fp8 and int8 have one
    return dtype


def scales_result(value: SSAValue, x: TensorType, scheme: QuantScheme) -> None:
    """The dequant scales a dynamic scheme returns: [1], [T, 1] or [T, H / group_size], f32
    unless the variant rounds them to another scale dtype."""
    t = tensor_of(value, "scales")
    want = scheme.variant.scale_dtype
    if dtype_of(t.element_type) != want:
        raise VerifyException(f"scales must be {want.value}, got {t.element_type}")
    shape = t.get_shape()
    if scheme.granularity == "tensor":
        expected: tuple[int, ...] = (1,)
    else:
        tokens = x.get_shape()[0] if x.get_num_dims() == 2 else DYNAMIC_INDEX
        cols = 1 if scheme.granularity == "token" else _groups(x, scheme)
        expected = (tokens, cols)
    if not shapes_agree(shape, expected):
        raise VerifyException(
            f"scales must have shape {_shape_of(expected)} for a per-{scheme.granularity} "
            f"scheme, got {_shape(t)}"
        )


def zero_point(value: SSAValue | None, x: TensorType, scheme: QuantScheme) -> None:
    """A runtime zero point: per tensor ([] or [1]); per token, x's shape with a last
    dimension of 1; per group (per-group schemes), x's shape with a last dimension of G;
    any float or 8-bit element type."""
    if value is None:
        return
    t = tensor_of(value, "zero_point")
    shape = t.get_shape()
    rows: tuple[int, ...] | None = None
    if scheme.granularity == "token":
        rows = (*x.get_shape()[:-1], 1)
    elif scheme.granularity == "group":
        rows = (*x.get_shape()[:-1], _groups(x, scheme))
    if shape not in ((), (1,)) and not (rows is not None and shapes_agree(shape, rows)):
        raise VerifyException(
            f"zero_point must have shape [] or [1]"
            f"{' or ' + _shape_of(rows) if rows is not None else ''}, got {t}"
        )
    et = t.element_type
    if not (isinstance(et, AnyFloat) or (isinstance(et, IntegerType) and et.width.data == 8)):
        raise VerifyException(f"zero_point must be a float or 8-bit tensor, got {t}")


def group_size(x: TensorType, size: int) -> None:
    h = hidden_size(x)
    if size <= 0:
        raise VerifyException(f"group_size must be positive, got {size}")
    if h != DYNAMIC_INDEX and h % size:
        raise VerifyException(f"group_size {size} does not divide the hidden size {h}")


def _groups(x: TensorType, scheme: QuantScheme) -> int:
    group_size(x, scheme.group_size)
    h = hidden_size(x)
    return DYNAMIC_INDEX if h == DYNAMIC_INDEX else h // scheme.group_size


def _dim(d: int) -> str:
    return "?" if d == DYNAMIC_INDEX else str(d)


def _shape_of(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(_dim(d) for d in shape) + "]"


def _shape(t: TensorType) -> str:
    return _shape_of(t.get_shape())
