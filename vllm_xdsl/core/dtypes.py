"""The element types the semantic ops use, by name: no torch here.

`DType` is what the core declarations (quant variants, op catalog) speak. A torch dtype is
recognised by its name (`str(torch.bfloat16)` is `"torch.bfloat16"`), so the core can
validate values the ops layer hands it without importing torch; the conversion to a torch
dtype lives in `vllm_xdsl.ops.dtypes`.
"""

from __future__ import annotations

import enum
from typing import Any


class DType(str, enum.Enum):
    """An element type; the value is its short spelling (the variant keywords use it)."""

    F64 = "f64"
    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    F8E4M3FN = "f8e4m3fn"
    F8E4M3FNUZ = "f8e4m3fnuz"
    I8 = "i8"
    I32 = "i32"
    I64 = "i64"

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        # No ": " in it: messages that embed a scheme's repr are split at the first one.
        return f"DType.{self.name}"

    @property
    def torch_name(self) -> str:
        """The attribute of `torch` that is this dtype (`torch.<torch_name>`)."""
        return _TORCH_NAME[self]

    @property
    def is_fp8(self) -> bool:
        return self in (DType.F8E4M3FN, DType.F8E4M3FNUZ)

    @classmethod
    def of(cls, dtype: Any) -> DType:
        """`dtype` (a DType, its spelling, or a torch dtype) as a DType; ValueError if none."""
        if isinstance(dtype, DType):
            return dtype
        text = str(dtype)
        found = _BY_TORCH_NAME.get(text.removeprefix("torch."))
        if found is None:
            try:
                return cls(text)
            except ValueError:
                raise ValueError(f"{dtype} is not an element type the ops use") from None
        return found


_TORCH_NAME: dict[DType, str] = {
    DType.F64: "float64", DType.F32: "float32", DType.F16: "float16", DType.BF16: "bfloat16",
    DType.F8E4M3FN: "float8_e4m3fn", DType.F8E4M3FNUZ: "float8_e4m3fnuz",
    DType.I8: "int8", DType.I32: "int32", DType.I64: "int64",
}
_BY_TORCH_NAME: dict[str, DType] = {name: d for d, name in _TORCH_NAME.items()}

FP8: tuple[DType, ...] = (DType.F8E4M3FN, DType.F8E4M3FNUZ)
QUANT: tuple[DType, ...] = (*FP8, DType.I8)
# Dtypes a quotient or a scale may be rounded to (quant variants).
ROUNDING: tuple[DType, ...] = (DType.F32, DType.BF16, DType.F16)
ACTIVATION: tuple[DType, ...] = (DType.F16, DType.BF16, DType.F32)

# FMAX per fp8 flavour (OPS.md): e4m3fnuz deliberately uses 224, below torch's 240.
_FP8_MAX: dict[DType, float] = {DType.F8E4M3FN: 448.0, DType.F8E4M3FNUZ: 224.0}
INT8_MAX = 127.0


def is_fp8(dtype: Any) -> bool:
    """Whether `dtype` (a DType or a torch dtype) is an fp8 flavour."""
    try:
        return DType.of(dtype).is_fp8
    except ValueError:
        return False


def fp8_max(dtype: Any) -> float:
    """The saturation bound FMAX of an fp8 flavour (a DType or a torch dtype)."""
    try:
        return _FP8_MAX[DType.of(dtype)]
    except (KeyError, ValueError):
        raise ValueError(
            f"{dtype} is not an fp8 dtype (expected one of float8_e4m3fn, float8_e4m3fnuz)"
        ) from None


def quant_max(dtype: Any) -> float:
    """FMAX for fp8 flavours, IMAX for int8."""
    return INT8_MAX if DType.of(dtype) == DType.I8 else fp8_max(dtype)
