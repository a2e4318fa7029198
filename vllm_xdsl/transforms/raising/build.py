"""Building the raised ops: norm ops with their epsilon (a property or the runtime operand)
and the one extra torch op a raise may need (a weight cast to f32)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from xdsl.dialects.builtin import Float64Type, FloatAttr, IntAttr, TensorType, UnitAttr
from xdsl.ir import Attribute, Operation, SSAValue

from vllm_xdsl.dialects.torch import CallOp, DtypeAttr, OperandRefAttr
from vllm_xdsl.dialects.torch_literals import to_attr
from vllm_xdsl.dialects.types import ir_element_type
from vllm_xdsl.dialects.vllm import FusedAddRmsNormOp, NormOp, RmsNormOp
from vllm_xdsl.transforms.raising import match as m


@dataclass(frozen=True)
class Epsilon:
    """Epsilon as a compile-time value or as the runtime scalar the graph passes in."""

    value: float | None = None
    operand: SSAValue | None = None

    @staticmethod
    def of(op: NormOp) -> Epsilon:
        return Epsilon(op.epsilon_float(), op.epsilon_value)


def epsilon_of(v: object) -> Epsilon | None:
    """A literal eps >= 0, or a 0-d float value seen through f32/f64 casts.

    The add computes in f32, so `eps.to(f64).to(f32)` and `eps` give the same f32 value;
    a cast through f16/bf16 rounds eps and is kept as part of the operand.
    """
    if m.is_number(v):
        return Epsilon(float(v)) if v >= 0 else None
    if not isinstance(v, SSAValue):
        return None
    wide = (torch.float32, torch.float64)
    while (c := m.cast_of(v)) is not None and m.dtype(c[0]) in wide and c[1] in wide:
        v = c[0]
    t = v.type
    if isinstance(t, TensorType):
        if t.get_num_dims() != 0 or m.dtype(v) not in wide + (torch.float16, torch.bfloat16):
            return None
    elif not isinstance(t, Float64Type):
        return None
    return Epsilon(None, v)


def build_norm(
    x: SSAValue,
    residual: SSAValue | None,
    weight: SSAValue | None,
    eps: Epsilon,
    out_type: Attribute,
    variance_size: Attribute | None = None,
    rounded_sum: bool = False,
) -> Operation:
    """A `vllm.rms_norm` (or `vllm.fused_add_rms_norm` when there is a residual; with
    `rounded_sum`, the variant that normalises the sum rounded to x's dtype)."""
    props: dict[str, Attribute] = {}
    if eps.operand is None:
        assert eps.value is not None  # an Epsilon is a value or an operand
        props["epsilon"] = FloatAttr(eps.value, Float64Type())
    if variance_size is not None:
        props["variance_size"] = variance_size
    if rounded_sum:
        assert residual is not None, "rounded_sum needs a residual"
        props["rounded_sum"] = UnitAttr()
    opt = [[weight] if weight is not None else [], [eps.operand] if eps.operand is not None else []]
    if residual is None:
        return RmsNormOp.build(operands=[x, *opt], result_types=[out_type], properties=props)
    return FusedAddRmsNormOp.build(
        operands=[x, residual, *opt], result_types=[out_type, residual.type], properties=props
    )


def cast_op(value: SSAValue, dt: torch.dtype) -> CallOp:
    """`prims.convert_element_type(value, dt)`, spelled as the importer spells it."""
    t = value.type
    assert isinstance(t, TensorType)
    return CallOp(
        "prims::convert_element_type.default",
        [value],
        [OperandRefAttr(IntAttr(0)), DtypeAttr(ir_element_type(dt))],
        [TensorType(ir_element_type(dt), t.get_shape())],
    )


def per_tensor_scale(value: SSAValue) -> tuple[list[Operation], SSAValue] | None:
    """`value` as the [1] tensor of a per-tensor scale (a reshape when it holds one value in
    another shape: vLLM's CPU int8 path passes `input_scale.max()`, a 0-d tensor), or None
    when it holds more than one value (or an unknown number)."""
    t = value.type
    if not isinstance(t, TensorType):
        return None
    shape = t.get_shape()
    if shape == (1,):
        return [], value
    if any(d != 1 for d in shape):  # a dynamic dim (-1) may hold more than one value
        return None
    reshape = CallOp("aten::reshape.default", [value],
                     [OperandRefAttr(IntAttr(0)), to_attr([1])],
                     [TensorType(t.element_type, (1,))])
    return [reshape], reshape.results[0]
