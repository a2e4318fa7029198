"""The one torch-literal converter (dialects/torch_literals.py): every kind of argument
value round-trips, operands are numbered by the caller, and what has no counterpart is a
one-line LiteralError."""

from __future__ import annotations

import math

import pytest
import torch
from xdsl.dialects.builtin import (
    ArrayAttr,
    Float16Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    i64,
)

from vllm_xdsl.dialects.torch import DtypeAttr, EnumAttr, NoneAttr, OperandRefAttr
from vllm_xdsl.dialects.torch_literals import (
    LiteralError,
    Named,
    operand_ref,
    to_attr,
    to_python,
)

ROUND_TRIPS = [
    None, True, False, 0, -3, 2**63 - 1, 1.5, float("inf"), "tanh", torch.bfloat16,
    torch.float8_e4m3fn, torch.device("cpu"), torch.contiguous_format, torch.strided,
    torch.ops.aten.add.Tensor, [1, [2.0, None], "x"],
]


def _no_operand(i: int) -> object:
    raise AssertionError(f"operand {i} asked for")


@pytest.mark.parametrize("value", ROUND_TRIPS, ids=repr)
def test_round_trip(value: object) -> None:
    back = to_python(to_attr(value), _no_operand)
    assert back == value and type(back) is type(value)


def test_kinds_stay_apart() -> None:
    assert to_attr(True) == IntegerAttr(1, IntegerType(1))
    assert to_attr(1) == IntegerAttr(1, i64)
    assert to_attr(1.0) == FloatAttr(1.0, 64)
    assert to_attr("torch.strided") == StringAttr("torch.strided")
    assert to_attr(Named("torch.strided")) == EnumAttr(StringAttr("torch.strided"))
    assert to_attr(torch.strided) == EnumAttr(StringAttr("torch.strided"))
    assert to_attr(torch.float16) == DtypeAttr(Float16Type()) and to_attr(None) == NoneAttr()
    assert to_attr((1, 2)) == ArrayAttr([IntegerAttr(1, i64), IntegerAttr(2, i64)])
    neg = to_attr(-0.0)
    assert isinstance(neg, FloatAttr) and math.copysign(1.0, neg.value.data) == -1.0
    assert math.isnan(to_python(to_attr(float("nan")), _no_operand))


def test_operands_are_the_callers() -> None:
    seen: list[object] = []

    class Value:
        pass

    a, b = Value(), Value()

    def operand(v: object) -> int | None:
        if not isinstance(v, Value):
            return None
        seen.append(v)
        return len(seen) - 1

    attr = to_attr([a, 3, [b]], operand)
    assert attr == ArrayAttr([operand_ref(0), IntegerAttr(3, i64), ArrayAttr([operand_ref(1)])])
    assert to_python(attr, ["A", "B"].__getitem__) == ["A", 3, ["B"]]
    assert isinstance(operand_ref(0), OperandRefAttr)


def test_unresolved_values_stay_attributes_for_matchers() -> None:
    for value in (torch.device("cpu"), torch.contiguous_format):
        attr = to_attr(value)
        assert to_python(attr, _no_operand, resolve=False) is attr
    assert to_python(StringAttr("s"), _no_operand, resolve=False) == "s"


@pytest.mark.parametrize(("value", "message"), [
    (2**63, "integer 9223372036854775808 does not fit in i64"),
    (object, "cannot represent argument <class 'object'> (type)"),
])
def test_a_value_without_attribute_is_one_line(value: object, message: str) -> None:
    with pytest.raises(LiteralError) as info:
        to_attr(value)
    assert str(info.value) == message


def test_an_attribute_without_value_is_one_line() -> None:
    with pytest.raises(LiteralError, match=r"^#torch.enum<'numpy.float32'> is not a torch value$"):
        to_python(EnumAttr(StringAttr("numpy.float32")), _no_operand)
    with pytest.raises(LiteralError, match="has no Python value"):
        to_python(i64, _no_operand)  # a type, not an argument
