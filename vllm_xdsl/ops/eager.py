"""Eager dispatch (outside torch.compile). Step 1: always the native contract."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_xdsl.ops.op import SemanticOp


def dispatch(op: SemanticOp, donated: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return op.native(*args, **kwargs)
