"""Implementation properties lower-dispatch can decide from the IR types alone.

- triton: `block_size` and `num_warps` by the Triton backend's own rules (the next power
  of two of the row width, or a column tile for ops without a row reduction), so the
  lowering and an eager launch pick the same kernel.
- cuda / rocm: `vec_width` = elements per 16-byte load (8 for f16/bf16, 4 for f32),
  halved until it divides the row width (and the group size of a per-group quant).

Nothing is set when the row width is unknown (`?`): the backend decides at run time.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Attribute, Operation

from vllm_xdsl.backends.triton.spec import default_block_size, default_num_warps
from vllm_xdsl.dialects.vllm import ActAndMulOp, QuantOp, SemanticSignature
from vllm_xdsl.transforms.dispatch_torch import meta

_LOAD_BYTES = 16
MAX_BLOCK = 1 << 16  # the triton dialect's bound on block_size


def row_width(op: SemanticSignature) -> int | None:
    """Columns of one row the kernel processes (None if unknown)."""
    h = meta(op.x)[1][-1] if meta(op.x)[1] else None
    if h is not None and isinstance(op, ActAndMulOp) and op.up is None:  # [gate | up] halves
        h //= 2
    return h


def vec_width(op: SemanticSignature, width: int) -> int:
    dtype = meta(op.x)[0]
    vec = max(_LOAD_BYTES // dtype.itemsize, 1)
    scheme = op.quant_scheme() if isinstance(op, QuantOp) else None
    group = scheme.group_size if scheme is not None and scheme.granularity == "group" else 0
    while vec > 1 and (width % vec or (group and group % vec)):
        vec //= 2
    return vec


def impl_properties(provider: str, op: Operation) -> dict[str, Attribute]:
    assert isinstance(op, SemanticSignature)
    width = row_width(op)
    if width is None:
        return {}
    if provider == "triton":
        scheme = op.quant_scheme() if isinstance(op, QuantOp) else None
        block = default_block_size(op.name.split(".", 1)[1], scheme, width)
        if block > MAX_BLOCK:  # beyond the dialect's range: leave it to the backend
            return {}
        return {"block_size": IntegerAttr(block, i64),
                "num_warps": IntegerAttr(default_num_warps(block), i64)}
    if provider in ("cuda", "rocm"):
        return {"vec_width": IntegerAttr(vec_width(op, width), i64)}
    return {}
