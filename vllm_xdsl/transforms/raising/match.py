"""Matching helpers over `torch.call` chains, shared by the raise-native patterns.

A pattern walks from the last op of a decomposition back to its inputs. These helpers
answer the questions it asks on the way: which overload defined this value, what is its
i-th argument (an SSA value or a Python literal), what dtype and shape does it have, and
is this op a plain dtype cast. Every helper returns None when the answer is "no", so a
pattern reads as a chain of `if (m := ...) is None: return None`.

`is_before` and `uses_after` are ir.placement's, named here too because the patterns ask
them as `m.is_before(...)` beside the other questions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeGuard

import torch
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    FloatAttr,
    IntegerAttr,
    TensorType,
)
from xdsl.ir import Attribute, OpResult, SSAValue

from vllm_xdsl.dialects.torch import (
    CONSTANT_VALUE,
    CallOp,
    EnumAttr,
    GetAttrOp,
    NoneAttr,
    OperandRefAttr,
)
from vllm_xdsl.dialects.torch_literals import to_python
from vllm_xdsl.dialects.types import UnsupportedDtypeError, torch_dtype
from vllm_xdsl.transforms.ir.placement import is_before as is_before
from vllm_xdsl.transforms.ir.placement import uses_after as uses_after

MISSING: Any = object()
"""An argument that is neither given positionally nor as a keyword."""

CAST_TARGETS = ("prims::convert_element_type.default", "aten::_to_copy.default")
ACTIVATION_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)

# Casts that represent every value exactly (bf16 -> f16 does not: f16 has less range).
EXACT_WIDENING = {
    (torch.float16, torch.float32), (torch.bfloat16, torch.float32),
    (torch.float16, torch.float64), (torch.bfloat16, torch.float64),
    (torch.float32, torch.float64),
    *((d, d) for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)),
}

# Mantissa bits: the precision at which a float dtype rounds.
# Keyed by m.dtype's result: None (a scalar, or no torch dtype) has no entry.
MANTISSA_BITS: dict[torch.dtype | None, int] = {torch.float64: 52, torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}


def call_of(value: SSAValue | None, *targets: str) -> CallOp | None:
    """The `torch.call` defining `value` if its target is one of `targets`."""
    if not isinstance(value, OpResult):
        return None
    op = value.op
    if isinstance(op, CallOp) and op.target.data in targets:
        return op
    return None


def literal(attr: Attribute, op: CallOp) -> Any:
    """A template attribute as a Python value; `#torch.operand<i>` gives the SSA operand
    (= op.inputs, its only operands, read cheaper). Devices and named torch values stay
    attributes: matchers compare them as they are."""
    return to_python(attr, op.operands.__getitem__, resolve=False)


def arg(op: CallOp, index: int, name: str | None = None, default: Any = MISSING) -> Any:
    """Argument `index` (or keyword `name`) of a call, as an SSA value or a Python literal."""
    if index < len(op.args.data):
        return literal(op.args.data[index], op)
    if name is not None and op.kwargs is not None and name in op.kwargs.data:
        return literal(op.kwargs.data[name], op)
    return default


def kwarg_names(op: CallOp) -> set[str]:
    return set() if op.kwargs is None else set(op.kwargs.data)


def is_number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def dtype(value: SSAValue) -> torch.dtype | None:
    """The torch dtype of a tensor value (None for scalars and unknown element types)."""
    t = value.type
    if not isinstance(t, TensorType):
        return None
    try:
        return torch_dtype(t.element_type)
    except UnsupportedDtypeError:
        return None


def shape(value: SSAValue) -> tuple[int, ...] | None:
    t = value.type
    return tuple(t.get_shape()) if isinstance(t, TensorType) else None


def rank(value: SSAValue) -> int:
    s = shape(value)
    return -1 if s is None else len(s)


def is_last_dim(dim: Any, value: SSAValue) -> bool:
    """`dim` names the last dimension of `value` (-1 or rank-1)."""
    return is_number(dim) and isinstance(dim, int) and dim in (-1, rank(value) - 1)


def static_last_dim(value: SSAValue) -> int | None:
    s = shape(value)
    if not s or s[-1] == DYNAMIC_INDEX:
        return None
    return s[-1]


_CAST_MEMO: dict[SSAValue, tuple[int, torch.dtype] | None] | None = None


@contextmanager
def memoized_casts() -> Iterator[None]:
    """Within: `cast_of` parses each cast op once (a pass run asks about each cast ~3
    times). Only what the op's properties and result type fix is kept, the operand index
    of the input: the input itself is read afresh, so rewrites of uses stay visible."""
    global _CAST_MEMO
    outer = _CAST_MEMO
    _CAST_MEMO = {} if outer is None else outer
    try:
        yield
    finally:
        _CAST_MEMO = outer


def cast_of(value: SSAValue | None) -> tuple[SSAValue, torch.dtype] | None:
    """(input, target dtype) when `value` is a pure dtype cast of `input`.

    Both spellings count: `prims.convert_element_type(x, dtype)` and
    `aten._to_copy(x, dtype=...)` with no device, layout or memory-format change.
    """
    op = call_of(value, *CAST_TARGETS)
    if op is None:
        return None
    assert value is not None  # call_of found its op
    if _CAST_MEMO is None:
        spec = _cast_spec(op, value)
    elif (spec := _CAST_MEMO.get(value, MISSING)) is MISSING:
        spec = _CAST_MEMO[value] = _cast_spec(op, value)
    return None if spec is None else (op.operands[spec[0]], spec[1])


def _cast_spec(op: CallOp, value: SSAValue) -> tuple[int, torch.dtype] | None:
    """cast_of's answer for `value`, a result of the cast op `op`: the operand index of the
    input and the target dtype."""
    if not op.args.data or not isinstance(ref := op.args.data[0], OperandRefAttr):
        return None
    if op.target.data == CAST_TARGETS[0]:
        target = arg(op, 1, "dtype")
        if len(op.args.data) != 2 or kwarg_names(op):
            return None
    else:
        if len(op.args.data) != 1:
            return None
        target = arg(op, 99, "dtype")
        for name in kwarg_names(op) - {"dtype"}:
            assert op.kwargs is not None  # kwarg_names(op) is empty without them
            v = op.kwargs.data[name]
            harmless = isinstance(v, NoneAttr) or (
                isinstance(v, IntegerAttr) and v.value.data == 0
            ) or (isinstance(v, EnumAttr) and v.value.data == "torch.preserve_format")
            if not harmless:
                return None
    if not isinstance(target, torch.dtype) or dtype(value) != target:
        return None
    return ref.index.data, target


def widened_from(value: SSAValue) -> SSAValue:
    """The value before exact widening casts (bf16 -> f32 and the like lose nothing)."""
    while (c := cast_of(value)) is not None:
        src, target = c
        if (dtype(src), target) not in EXACT_WIDENING:
            break
        value = src
    return value


def as_f32_of(value: SSAValue) -> SSAValue | None:
    """The activation `x` such that `value` holds exactly `x.float()` (or x itself if f32)."""
    if dtype(value) != torch.float32:
        return None
    source = widened_from(value)
    return source if dtype(source) in ACTIVATION_DTYPES else None


def operands_of(op: CallOp, n: int) -> list[Any] | None:
    """The first n positional arguments, if the call has exactly those and no kwargs but alpha=1."""
    if len(op.args.data) != n:
        return None
    for name in kwarg_names(op):
        if name != "alpha" or arg(op, 99, "alpha") != 1:
            return None
    return [arg(op, i) for i in range(n)]


VIEW_TARGETS = ("aten::view.default", "aten::reshape.default", "aten::unflatten.int",
                "aten::_unsafe_view.default")


def same_value(a: SSAValue, b: SSAValue) -> bool:
    """`a` and `b` hold the same tensor: one value, or two views of one value to one type
    with at most one dynamic dim (the type then fixes the shape, and a view of a shape is
    unique). compressed-tensors splits x into groups twice: for the scale and the quotient."""
    if a is b:
        return True
    va, vb = call_of(a, *VIEW_TARGETS), call_of(b, *VIEW_TARGETS)
    if va is None or vb is None or a.type != b.type:
        return False
    src, dims = arg(va, 0), shape(a)
    return (isinstance(src, SSAValue) and src is arg(vb, 0) and dims is not None
            and sum(d == DYNAMIC_INDEX for d in dims) <= 1)


def single_use(value: SSAValue) -> bool:
    return value.has_one_use()


def same_type(a: SSAValue, b: SSAValue) -> bool:
    return a.type == b.type


_CONSTANT_ARITHMETIC: dict[str, Callable[[Any, Any], torch.Tensor]] = {
    "aten::sub.Tensor": torch.sub, "aten::add.Tensor": torch.add,
    "aten::mul.Tensor": torch.mul, "aten::div.Tensor": torch.div,
}


def constant_value(value: Any, depth: int = 8) -> float | None:
    """The value of a number, or of a 0-d tensor computed from recorded constants only
    (`torch.get_attr` with a `torch.value`, `lift_fresh_copy`, `scalar_tensor` of a
    literal, casts, + - * /), evaluated with torch in the graph's dtypes so that it is
    exactly what the graph computes.

    `torch.tensor(c)` of a Python float `c` is traced as `get_attr` + `lift_fresh_copy`
    when Dynamo specializes floats, but under `dynamic=True` a float read from a global
    (compressed-tensors' `FP8_E4M3_DATA.max`) reaches AOT as a SymFloat that it specializes
    back into the literal of an `aten.scalar_tensor`."""
    t = _constant_tensor(value, depth)
    if t is None:
        return None
    return float(t.item()) if isinstance(t, torch.Tensor) else float(t)


def _constant_tensor(value: Any, depth: int) -> torch.Tensor | float | None:
    if is_number(value):
        return float(value)
    if not isinstance(value, OpResult) or depth <= 0 or shape(value) != ():
        return None
    op, dt = value.op, dtype(value)
    if isinstance(op, GetAttrOp):
        attr = op.attributes.get(CONSTANT_VALUE)
        if not isinstance(attr, FloatAttr) or dt is None:
            return None
        return torch.tensor(attr.value.data, dtype=dt)
    if not isinstance(op, CallOp):
        return None
    target = op.target.data
    if target == "aten::scalar_tensor.default":
        s = arg(op, 0)
        if not is_number(s) or dt is None or len(op.args.data) != 1:
            return None
        # As the get_attr case: torch.tensor, a constant even under the fake mode that
        # is active while AOT compiles (a fake scalar_tensor has no value to read).
        return torch.tensor(s, dtype=dt)
    if target == "aten::lift_fresh_copy.default" or cast_of(value) is not None:
        src = _constant_tensor(arg(op, 0), depth - 1)
        if isinstance(src, torch.Tensor) and dt is not None:
            return src.to(dt)
        return None
    if target in _CONSTANT_ARITHMETIC and (args := operands_of(op, 2)) is not None:
        a, b = (_constant_tensor(x, depth - 1) for x in args)
        if a is None or b is None or not any(isinstance(x, torch.Tensor) for x in (a, b)):
            return None
        out = _CONSTANT_ARITHMETIC[target](a, b)
        return out if out.dtype == dt else None
    return None
