"""Names of FX call targets in `torch.call` (the scheme: dialects/call_targets.py)."""

from __future__ import annotations

from typing import Any

import torch

from vllm_xdsl.dialects.call_targets import HIGHER_ORDER, PYTHON, resolve_target
from vllm_xdsl.frontend.types import FrontendError

__all__ = ["target_name"]


def target_name(target: Any) -> str:
    """The qualified name of a call target; FrontendError if it cannot be named exactly."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target._schema.name}.{target._overloadname}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        name = target.name()
        if getattr(torch.ops.higher_order, name, None) is not target:
            raise FrontendError(f"higher-order op {name} is not torch.ops.higher_order.{name}")
        return f"{HIGHER_ORDER}::{name}"
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if module and qualname and callable(target):
        name = f"{PYTHON}::{module}.{qualname}"
        try:
            found = resolve_target(name)
        except (ImportError, AttributeError):
            found = None
        if found is target:
            return name
    raise FrontendError(f"call target {target!r} cannot be named so that it resolves again")
