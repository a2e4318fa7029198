"""The IR <-> native binding (dialects/binding.py): both directions agree on every op."""

from pathlib import Path

import pytest
from xdsl.dialects.builtin import Float64Type, FloatAttr, StringAttr, TensorType, f32
from xdsl.ir import SSAValue
from xdsl.parser import Parser
from xdsl.utils.test_value import create_ssa_value

from vllm_xdsl.core.catalog import SPECS
from vllm_xdsl.dialects import make_context
from vllm_xdsl.dialects.binding import BindingError, ir_operands, ir_properties, native_args
from vllm_xdsl.dialects.vllm import (
    OPS_BY_NAME,
    FatreluAndMulOp,
    GeluAndMulSparseOp,
    PerTokenGroupFp8QuantOp,
    SemanticSignature,
)

_IR_FILES = ("vllm_roundtrip.mlir", "vllm_quant_variants.mlir", "fuse-norm-quant.mlir")


def _vllm_ops() -> list[SemanticSignature]:
    found: list[SemanticSignature] = []
    for name in _IR_FILES:
        text = (Path(__file__).parent / "filecheck" / name).read_text()
        for chunk in text.split("// -----"):
            module = Parser(make_context(), chunk).parse_module()
            found += [op for op in module.walk()
                      if isinstance(op, SemanticSignature) and op.name.startswith("vllm.")]
    return found


def _sparse_op(approximate: str | None) -> GeluAndMulSparseOp:
    t = TensorType(f32, [4, 8])
    props = {"std_multiplier": FloatAttr(1.5, Float64Type())}
    if approximate is not None:
        props["approximate"] = StringAttr(approximate)
    return GeluAndMulSparseOp.build(operands=[create_ssa_value(t), []],
                                    result_types=[TensorType(f32, [4, 4])], properties=props)


def _fatrelu_op(threshold: float | None) -> FatreluAndMulOp:
    t = TensorType(f32, [4, 8])
    props = {} if threshold is None else {"threshold": FloatAttr(threshold, Float64Type())}
    return FatreluAndMulOp.build(operands=[create_ssa_value(t), []],
                                 result_types=[TensorType(f32, [4, 4])], properties=props)


def _is_value(arg: object) -> bool:
    return isinstance(arg, SSAValue)


def _own_properties(op: SemanticSignature) -> dict:
    return {k: v for k, v in op.properties.items() if k != "operandSegmentSizes"}


def test_every_vllm_op_round_trips_through_its_native_arguments() -> None:
    ops = [*_vllm_ops(), _sparse_op("tanh"), _sparse_op(None), _fatrelu_op(0.1), _fatrelu_op(None)]
    assert {op.SEMANTIC_NAME for op in ops} == set(SPECS), "an op the IR files do not cover"
    for op in ops:
        args = native_args(op, lambda v: v)  # operands stay SSA values
        assert list(args) == list(SPECS[op.SEMANTIC_NAME].param_names), op.name
        cls = OPS_BY_NAME[op.SEMANTIC_NAME]
        operands = ir_operands(cls, args, _is_value)
        for name, _ in cls.get_irdl_definition().operands:
            assert operands[name] is getattr(op, name), f"{op.name}: operand {name}"
        assert ir_properties(cls, args, _is_value) == _own_properties(op), op.name


def test_native_values_come_from_properties_scheme_and_result_type() -> None:
    sparse = native_args(_sparse_op(None), lambda v: "x")
    assert sparse == {"x": "x", "std_multiplier": 1.5, "approximate": "none", "up": None}
    assert native_args(_sparse_op("tanh"), lambda v: "x")["approximate"] == "tanh"
    group = next(op for op in _vllm_ops() if isinstance(op, PerTokenGroupFp8QuantOp))
    args = native_args(group, lambda v: "x")
    assert args["group_size"] == group.group_size.value.data
    assert str(args["fp8_dtype"]).startswith("torch.float8_e4m3fn")


def test_a_graph_value_where_the_ir_needs_a_literal_is_an_error() -> None:
    op = _sparse_op(None)
    args = native_args(op, lambda v: v)
    args["std_multiplier"] = create_ssa_value(Float64Type())
    with pytest.raises(BindingError, match="std_multiplier must be a compile-time float"):
        ir_properties(GeluAndMulSparseOp, args, _is_value)
