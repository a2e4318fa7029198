"""ir.torch_builder builds each recurring literal and tensor type once: the cache must keep
apart the values that compare equal in Python (1, 1.0 and True; -0.0 and 0.0; an Enum
and its str)."""

from __future__ import annotations

import math

import torch
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, StringAttr, TensorType, i64
from xdsl.ir import Block

from vllm_xdsl.dialects.torch import EnumAttr
from vllm_xdsl.dialects.types import ir_element_type
from vllm_xdsl.transforms.ir.torch_builder import Enum, TorchBuilder, literal


def test_equal_python_values_keep_their_kind() -> None:
    assert literal(True) == IntegerAttr(1, IntegerType(1))
    assert literal(1) == IntegerAttr(1, i64)
    assert literal(1.0) == FloatAttr(1.0, 64)
    assert literal(True) != literal(1)
    assert literal(Enum("torch.contiguous_format")) == EnumAttr(StringAttr("torch.contiguous_format"))
    assert literal("torch.contiguous_format") == StringAttr("torch.contiguous_format")


def test_negative_zero_keeps_its_sign() -> None:
    assert literal(0.0).value.data == 0.0
    for _ in range(2):
        neg = literal(-0.0)
        assert isinstance(neg, FloatAttr) and math.copysign(1.0, neg.value.data) == -1.0


def test_built_types_follow_the_arguments() -> None:
    block = Block(arg_types=[TensorType(ir_element_type(torch.bfloat16), [4, 8])])
    b = TorchBuilder()
    x = block.args[0]
    y = b.call("prims::convert_element_type.default", x, torch.float32, dtype=torch.float32)
    z = b.call("aten::sum.dim_IntList", y, [-1], True, shape=(4, 1))
    assert str(y.type) == "tensor<4x8xf32>" and str(z.type) == "tensor<4x1xf32>"
    assert b.convert(y, torch.float32) is y

