"""Implementation properties lower-dispatch can decide from the IR types alone.

Each provider decides its own (triton: `block_size` and `num_warps`, by the rules its
launcher uses, so the lowering and an eager launch pick the same kernel; cuda / rocm:
`vec_width`, the elements per 16-byte load), and registers that rule with its impls
(`ops.registry.register_property_rule`): this pass knows no backend.

Nothing is set when the row width is unknown (`?`): the backend decides at run time.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Attribute, Operation

from vllm_xdsl.dialects.vllm import ActAndMulOp, QuantOp, SemanticSignature
from vllm_xdsl.ops import registry
from vllm_xdsl.transforms.ir.torch_builder import meta

MAX_BLOCK = 1 << 16  # the triton dialect's bound on block_size


def row_width(op: SemanticSignature) -> int | None:
    """Columns of one row the kernel processes (None if unknown)."""
    h = meta(op.x)[1][-1] if meta(op.x)[1] else None
    if h is not None and isinstance(op, ActAndMulOp) and op.up is None:  # [gate | up] halves
        h //= 2
    return h


def impl_properties(provider: str, op: Operation) -> dict[str, Attribute]:
    assert isinstance(op, SemanticSignature)
    rule = registry.property_rule(provider)
    width = row_width(op)
    if rule is None or width is None:
        return {}
    scheme = op.quant_scheme() if isinstance(op, QuantOp) else None
    props = rule(op=op.SEMANTIC_NAME, dtype=meta(op.x)[0], width=width, scheme=scheme)
    if props.get("block_size", 0) > MAX_BLOCK:  # beyond the dialect's range: the backend's
        return {}
    return {name: IntegerAttr(value, i64) for name, value in props.items()}
