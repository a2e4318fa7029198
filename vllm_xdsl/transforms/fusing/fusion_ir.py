"""IR helpers of the fusion passes: row-preserving views, order in a block, dead leftovers.

Kept apart from the rewrite patterns so that each stays small; nothing here knows about
norms or quant schemes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    TensorType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.irdl import IRDLOperation, OptOperandDef, OptResultDef
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from vllm_xdsl.dialects.torch import CallOp, OperandRefAttr
from vllm_xdsl.transforms.raising.match import is_before

# aten shape ops that only regroup dimensions of a row-major tensor: element order and
# element count are kept, so when the last dimension is kept too, every row (token) stays a
# row, in the same order. (_reshape_alias is not here: its explicit strides may permute.)
_ROW_VIEW_OPS = frozenset(
    {"view", "reshape", "_unsafe_view", "flatten", "unflatten", "squeeze", "unsqueeze"}
)
_OPERAND_0, _OPERAND_1 = OperandRefAttr(IntAttr(0)), OperandRefAttr(IntAttr(1))


def _aten_op_name(target: str) -> str | None:
    namespace, _, rest = target.partition("::")
    return rest.partition(".")[0] if namespace == "aten" else None


def is_row_view(op: Operation) -> bool:
    """A `torch.call` view/reshape of operand 0 that keeps the element type and a static
    last dimension: it regroups leading dims only, so rows and per-row scales are kept."""
    if not isinstance(op, CallOp) or _aten_op_name(op.target.data) not in _ROW_VIEW_OPS:
        return False
    if len(op.outputs) != 1 or not op.inputs or not op.args.data:
        return False
    if op.args.data[0] != _OPERAND_0:
        return False
    src, dst = op.inputs[0].type, op.outputs[0].type
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)):
        return False
    if src.element_type != dst.element_type or not src.get_shape() or not dst.get_shape():
        return False
    last_src, last_dst = src.get_shape()[-1], dst.get_shape()[-1]
    # The data operand may be referenced only once (args[0]); others are shape scalars.
    if op.inputs[0] in op.inputs[1:]:
        return False
    return last_src == last_dst != DYNAMIC_INDEX


def reapply_view(view: CallOp, value: SSAValue) -> CallOp:
    """The same view applied to `value` (same shape as the view's input, any element type)."""
    old = view.outputs[0].type
    assert isinstance(old, TensorType) and isinstance(value.type, TensorType)
    result = TensorType(value.type.element_type, old.get_shape())
    return CallOp.create(
        operands=[value, *view.inputs[1:]],
        result_types=[result],
        properties=dict(view.properties),
        attributes=dict(view.attributes),
    )


def is_unit_add(op: Operation) -> bool:
    """`aten::add.Tensor(a, b)` with alpha 1 or absent, a, b and the sum of one tensor type
    (no broadcasting, no type promotion)."""
    if not isinstance(op, CallOp) or op.target.data != "aten::add.Tensor":
        return False
    if len(op.inputs) != 2 or len(op.outputs) != 1:
        return False
    if list(op.args.data) != [_OPERAND_0, _OPERAND_1]:
        return False
    kwargs = {} if op.kwargs is None else dict(op.kwargs.data)
    alpha = kwargs.pop("alpha", None)
    if kwargs or not (alpha is None or _is_one(alpha)):
        return False
    t = op.outputs[0].type
    return isinstance(t, TensorType) and all(v.type == t for v in op.inputs)


def _is_one(attr: Attribute) -> bool:
    return isinstance(attr, (IntegerAttr, FloatAttr)) and attr.value.data == 1


def dominates(value: SSAValue, op: Operation) -> bool:
    """`value` is defined before `op` (an argument of an enclosing block, or an earlier op
    of op's block). Values defined in other blocks count as not dominating (conservative)."""
    if isinstance(value, BlockArgument):
        block: Block | None = op.parent
        while block is not None:
            if value.block is block:
                return True
            parent = block.parent_op()
            block = parent.parent if parent is not None else None
        return False
    owner = value.owner
    return isinstance(owner, Operation) and is_before(owner, op)


def all_before(op: Operation, users: list[Operation]) -> bool:
    return all(is_before(op, u) for u in users)


_Op = TypeVar("_Op", bound=IRDLOperation)


def build_op(
    cls: type[_Op],
    operands: Mapping[str, SSAValue | None],
    result_types: Mapping[str, Attribute | None],
    properties: Mapping[str, Attribute],
) -> _Op:
    """Build `cls` from operands and result types by name (absent optional ones: None),
    in the order of its IRDL definition, so callers need not know segment layouts."""
    definition = cls.get_irdl_definition()
    ops_args: list[SSAValue | list[SSAValue]] = []
    for name, odef in definition.operands:
        v = operands.get(name)
        if isinstance(odef, OptOperandDef):
            ops_args.append([] if v is None else [v])
        else:
            assert v is not None, f"{cls.name}: operand {name} is required"
            ops_args.append(v)
    res_args: list[Attribute | list[Attribute]] = []
    for name, rdef in definition.results:
        t = result_types.get(name)
        if isinstance(rdef, OptResultDef):
            res_args.append([] if t is None else [t])
        else:
            assert t is not None, f"{cls.name}: result {name} is required"
            res_args.append(t)
    return cls.build(operands=ops_args, result_types=res_args, properties=dict(properties))


def erase_dead(op: Operation, rewriter: PatternRewriter) -> None:
    """Erase `op` if it is trivially dead (unused and without effects: Pure, or a
    side-effect-free torch call), then the producers of its operands that became so."""
    work = [op]
    while work:
        cur = work.pop()
        if cur.parent is None or not is_trivially_dead(cur):
            continue
        producers = [v.owner for v in cur.operands if isinstance(v.owner, Operation)]
        rewriter.erase(cur)
        work.extend(producers)


def insert_before(rewriter: PatternRewriter, op: Operation, anchor: Operation) -> None:
    rewriter.insert(op, InsertPoint.before(anchor))

