"""The `vllm` dialect: one op per semantic operation of docs/OPS.md.

GENERATED from vllm_xdsl/core/catalog.py by `python -m vllm_xdsl.tools.gen_vllm_dialect`:
do not edit. Change the catalog (or a family in vllm_families.py, where each family's
operands, syntax and verifier are written, with examples) and run it again.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    BoolAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
)
from xdsl.ir import Dialect
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
)

from vllm_xdsl.dialects.vllm_families import (
    ATTRIBUTES,
    FusedAddRmsNormQuantSignature,
    FusedAddRmsNormSignature,
    RmsNormQuantSignature,
    RmsNormSignature,
    _ActAndMulQuantSignature,
    _ActAndMulSignature,
    _UnfusedQuantSignature,
)
from vllm_xdsl.dialects.vllm_interfaces import (
    ActAndMulOp,
    FusedQuantOp,
    NormOp,
    QuantOp,
    ResidualNormOp,
    SemanticSignature,
    define_op,
    has_rounded_sum,
    op_class_name,
)


class StaticScaledFp8QuantSignature(_UnfusedQuantSignature):
    SEMANTIC_NAME: ClassVar[str] = "static_scaled_fp8_quant"
    assembly_format = (
        "$x `,` $scale "
        "(`zero_point` `(` $zero_point^ `:` type($zero_point) `)`)? "
        "attr-dict `:` type($x) `,` type($scale) `->` type($q)"
    )
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    q = result_def(TensorType)


class DynamicScaledFp8QuantSignature(_UnfusedQuantSignature):
    SEMANTIC_NAME: ClassVar[str] = "dynamic_scaled_fp8_quant"
    assembly_format = (
        "$x "
        "(`zero_point` `(` $zero_point^ `:` type($zero_point) `)`)? "
        "attr-dict `:` type($x) `->` type($q) `,` type($scale)"
    )
    x = operand_def(TensorType)
    q = result_def(TensorType)
    scale = result_def(TensorType)


class DynamicPerTokenScaledFp8QuantSignature(_UnfusedQuantSignature):
    SEMANTIC_NAME: ClassVar[str] = "dynamic_per_token_scaled_fp8_quant"
    assembly_format = (
        "$x "
        "(`scale_ub` `(` $scale_ub^ `:` type($scale_ub) `)`)? "
        "(`zero_point` `(` $zero_point^ `:` type($zero_point) `)`)? "
        "attr-dict `:` type($x) `->` type($q) `,` type($scales)"
    )
    x = operand_def(TensorType)
    scale_ub = opt_operand_def(TensorType)
    q = result_def(TensorType)
    scales = result_def(TensorType)


class PerTokenGroupFp8QuantSignature(_UnfusedQuantSignature):
    SEMANTIC_NAME: ClassVar[str] = "per_token_group_fp8_quant"
    assembly_format = (
        "$x "
        "(`zero_point` `(` $zero_point^ `:` type($zero_point) `)`)? "
        "attr-dict `:` type($x) `->` type($q) `,` type($scales)"
    )
    x = operand_def(TensorType)
    group_size = prop_def(IntegerAttr[I64])
    column_major_scales = opt_prop_def(BoolAttr)
    use_ue8m0 = opt_prop_def(BoolAttr)
    eps = opt_prop_def(FloatAttr[Float64Type])
    q = result_def(TensorType)
    scales = result_def(TensorType)


class StaticScaledInt8QuantSignature(_UnfusedQuantSignature):
    SEMANTIC_NAME: ClassVar[str] = "static_scaled_int8_quant"
    assembly_format = (
        "$x `,` $scale "
        "(`zero_point` `(` $zero_point^ `:` type($zero_point) `)`)? "
        "attr-dict `:` type($x) `,` type($scale) `->` type($q)"
    )
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    q = result_def(TensorType)


class DynamicPerTokenScaledInt8QuantSignature(_UnfusedQuantSignature):
    SEMANTIC_NAME: ClassVar[str] = "dynamic_per_token_scaled_int8_quant"
    assembly_format = (
        "$x "
        "(`zero_point` `(` $zero_point^ `:` type($zero_point) `)`)? "
        "attr-dict `:` type($x) `->` type($q) `,` type($scales)"
    )
    x = operand_def(TensorType)
    q = result_def(TensorType)
    scales = result_def(TensorType)


class SiluAndMulSignature(_ActAndMulSignature):
    SEMANTIC_NAME: ClassVar[str] = "silu_and_mul"
    ACTIVATION: ClassVar[str] = "silu"


class GeluAndMulSignature(_ActAndMulSignature):
    SEMANTIC_NAME: ClassVar[str] = "gelu_and_mul"
    ACTIVATION: ClassVar[str] = "gelu"


class GeluTanhAndMulSignature(_ActAndMulSignature):
    SEMANTIC_NAME: ClassVar[str] = "gelu_tanh_and_mul"
    ACTIVATION: ClassVar[str] = "gelu_tanh"


class FatreluAndMulSignature(_ActAndMulSignature):
    SEMANTIC_NAME: ClassVar[str] = "fatrelu_and_mul"
    ACTIVATION: ClassVar[str] = "fatrelu"
    threshold = opt_prop_def(FloatAttr[Float64Type])


class GeluAndMulSparseSignature(_ActAndMulSignature):
    SEMANTIC_NAME: ClassVar[str] = "gelu_and_mul_sparse"
    ACTIVATION: ClassVar[str] = "gelu"
    std_multiplier = prop_def(FloatAttr[Float64Type])
    approximate = opt_prop_def(StringAttr)


class SiluAndMulQuantSignature(_ActAndMulQuantSignature):
    SEMANTIC_NAME: ClassVar[str] = "silu_and_mul_quant"
    ACTIVATION: ClassVar[str] = "silu"


class GeluAndMulQuantSignature(_ActAndMulQuantSignature):
    SEMANTIC_NAME: ClassVar[str] = "gelu_and_mul_quant"
    ACTIVATION: ClassVar[str] = "gelu"


class GeluTanhAndMulQuantSignature(_ActAndMulQuantSignature):
    SEMANTIC_NAME: ClassVar[str] = "gelu_tanh_and_mul_quant"
    ACTIVATION: ClassVar[str] = "gelu_tanh"


@irdl_op_definition
class RmsNormOp(RmsNormSignature):
    name = "vllm.rms_norm"


@irdl_op_definition
class FusedAddRmsNormOp(FusedAddRmsNormSignature):
    name = "vllm.fused_add_rms_norm"


@irdl_op_definition
class StaticScaledFp8QuantOp(StaticScaledFp8QuantSignature):
    name = "vllm.static_scaled_fp8_quant"


@irdl_op_definition
class DynamicScaledFp8QuantOp(DynamicScaledFp8QuantSignature):
    name = "vllm.dynamic_scaled_fp8_quant"


@irdl_op_definition
class DynamicPerTokenScaledFp8QuantOp(DynamicPerTokenScaledFp8QuantSignature):
    name = "vllm.dynamic_per_token_scaled_fp8_quant"


@irdl_op_definition
class PerTokenGroupFp8QuantOp(PerTokenGroupFp8QuantSignature):
    name = "vllm.per_token_group_fp8_quant"


@irdl_op_definition
class StaticScaledInt8QuantOp(StaticScaledInt8QuantSignature):
    name = "vllm.static_scaled_int8_quant"


@irdl_op_definition
class DynamicPerTokenScaledInt8QuantOp(DynamicPerTokenScaledInt8QuantSignature):
    name = "vllm.dynamic_per_token_scaled_int8_quant"


@irdl_op_definition
class SiluAndMulOp(SiluAndMulSignature):
    name = "vllm.silu_and_mul"


@irdl_op_definition
class GeluAndMulOp(GeluAndMulSignature):
    name = "vllm.gelu_and_mul"


@irdl_op_definition
class GeluTanhAndMulOp(GeluTanhAndMulSignature):
    name = "vllm.gelu_tanh_and_mul"


@irdl_op_definition
class FatreluAndMulOp(FatreluAndMulSignature):
    name = "vllm.fatrelu_and_mul"


@irdl_op_definition
class GeluAndMulSparseOp(GeluAndMulSparseSignature):
    name = "vllm.gelu_and_mul_sparse"


@irdl_op_definition
class RmsNormQuantOp(RmsNormQuantSignature):
    name = "vllm.rms_norm_quant"


@irdl_op_definition
class FusedAddRmsNormQuantOp(FusedAddRmsNormQuantSignature):
    name = "vllm.fused_add_rms_norm_quant"


@irdl_op_definition
class SiluAndMulQuantOp(SiluAndMulQuantSignature):
    name = "vllm.silu_and_mul_quant"


@irdl_op_definition
class GeluAndMulQuantOp(GeluAndMulQuantSignature):
    name = "vllm.gelu_and_mul_quant"


@irdl_op_definition
class GeluTanhAndMulQuantOp(GeluTanhAndMulQuantSignature):
    name = "vllm.gelu_tanh_and_mul_quant"


# The signatures, in the catalog's order (unfused, then fused): the provider
# dialects and auto declare one op of each.
SIGNATURES: tuple[type[SemanticSignature], ...] = (
    RmsNormSignature,
    FusedAddRmsNormSignature,
    StaticScaledFp8QuantSignature,
    DynamicScaledFp8QuantSignature,
    DynamicPerTokenScaledFp8QuantSignature,
    PerTokenGroupFp8QuantSignature,
    StaticScaledInt8QuantSignature,
    DynamicPerTokenScaledInt8QuantSignature,
    SiluAndMulSignature,
    GeluAndMulSignature,
    GeluTanhAndMulSignature,
    FatreluAndMulSignature,
    GeluAndMulSparseSignature,
    RmsNormQuantSignature,
    FusedAddRmsNormQuantSignature,
    SiluAndMulQuantSignature,
    GeluAndMulQuantSignature,
    GeluTanhAndMulQuantSignature,
)
VLLM_OPS: tuple[type[SemanticSignature], ...] = (
    RmsNormOp,
    FusedAddRmsNormOp,
    StaticScaledFp8QuantOp,
    DynamicScaledFp8QuantOp,
    DynamicPerTokenScaledFp8QuantOp,
    PerTokenGroupFp8QuantOp,
    StaticScaledInt8QuantOp,
    DynamicPerTokenScaledInt8QuantOp,
    SiluAndMulOp,
    GeluAndMulOp,
    GeluTanhAndMulOp,
    FatreluAndMulOp,
    GeluAndMulSparseOp,
    RmsNormQuantOp,
    FusedAddRmsNormQuantOp,
    SiluAndMulQuantOp,
    GeluAndMulQuantOp,
    GeluTanhAndMulQuantOp,
)
# Semantic op name -> vllm op class.
OPS_BY_NAME: dict[str, type[SemanticSignature]] = {op.SEMANTIC_NAME: op for op in VLLM_OPS}

Vllm = Dialect("vllm", list(VLLM_OPS), list(ATTRIBUTES))

__all__ = [
    "OPS_BY_NAME",
    "SIGNATURES",
    "VLLM_OPS",
    "ActAndMulOp",
    "DynamicPerTokenScaledFp8QuantOp",
    "DynamicPerTokenScaledFp8QuantSignature",
    "DynamicPerTokenScaledInt8QuantOp",
    "DynamicPerTokenScaledInt8QuantSignature",
    "DynamicScaledFp8QuantOp",
    "DynamicScaledFp8QuantSignature",
    "FatreluAndMulOp",
    "FatreluAndMulSignature",
    "FusedAddRmsNormOp",
    "FusedAddRmsNormQuantOp",
    "FusedAddRmsNormQuantSignature",
    "FusedAddRmsNormSignature",
    "FusedQuantOp",
    "GeluAndMulOp",
    "GeluAndMulQuantOp",
    "GeluAndMulQuantSignature",
    "GeluAndMulSignature",
    "GeluAndMulSparseOp",
    "GeluAndMulSparseSignature",
    "GeluTanhAndMulOp",
    "GeluTanhAndMulQuantOp",
    "GeluTanhAndMulQuantSignature",
    "GeluTanhAndMulSignature",
    "NormOp",
    "PerTokenGroupFp8QuantOp",
    "PerTokenGroupFp8QuantSignature",
    "QuantOp",
    "ResidualNormOp",
    "RmsNormOp",
    "RmsNormQuantOp",
    "RmsNormQuantSignature",
    "RmsNormSignature",
    "SemanticSignature",
    "SiluAndMulOp",
    "SiluAndMulQuantOp",
    "SiluAndMulQuantSignature",
    "SiluAndMulSignature",
    "StaticScaledFp8QuantOp",
    "StaticScaledFp8QuantSignature",
    "StaticScaledInt8QuantOp",
    "StaticScaledInt8QuantSignature",
    "Vllm",
    "define_op",
    "has_rounded_sum",
    "op_class_name",
]
