"""The views fuse-norm-quant sees through: aten reshapes that keep every row a row, and
the same view re-applied to the fused op's result. Nothing here knows about norms or quant
schemes.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DYNAMIC_INDEX, IntAttr, TensorType
from xdsl.ir import Operation, SSAValue

from vllm_xdsl.dialects.torch import CallOp, OperandRefAttr

# aten shape ops that only regroup dimensions of a row-major tensor: element order and
# element count are kept, so when the last dimension is kept too, every row (token) stays a
# row, in the same order. (_reshape_alias is not here: its explicit strides may permute.)
_ROW_VIEW_OPS = frozenset(
    {"view", "reshape", "_unsafe_view", "flatten", "unflatten", "squeeze", "unsqueeze"}
)
_OPERAND_0 = OperandRefAttr(IntAttr(0))


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
