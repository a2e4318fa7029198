"""Literal arguments of FX nodes as attributes of the `torch.call` argument template.

Nodes become `#torch.operand<i>` (operands are numbered in order of first use); Python
literals become the attributes of the one converter, dialects/torch_literals.py, which the
exporter reads back into the same Python values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from xdsl.ir import Attribute

from vllm_xdsl.dialects.torch_literals import LiteralError, to_attr
from vllm_xdsl.frontend.types import FrontendError


def literal(value: Any, operand: Callable[[torch.fx.Node], int], what: str) -> Attribute:
    """The attribute of one argument; `operand(node)` gives a node's operand index.
    FrontendError, naming `what`, for a value with no attribute."""
    try:
        return to_attr(value, lambda v: operand(v) if isinstance(v, torch.fx.Node) else None)
    except LiteralError as e:
        raise FrontendError(f"{what}: {e}") from None
