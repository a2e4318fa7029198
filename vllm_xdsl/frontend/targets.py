"""Names of FX call targets in `torch.call`: `aten::add.Tensor` for op overloads,
`higher_order::auto_functionalized` for higher-order ops and `python::_operator.mul` for
the Python functions of size arithmetic (operator.*, math.*, torch.sym_*)."""

from __future__ import annotations

import importlib
from typing import Any

import torch

from vllm_xdsl.frontend.types import FrontendError

PYTHON = "python"
HIGHER_ORDER = "higher_order"


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


def resolve_target(name: str) -> Any:
    """The callable a target name denotes (the inverse of `target_name`)."""
    namespace, _, rest = name.partition("::")
    if namespace == HIGHER_ORDER:
        return getattr(torch.ops.higher_order, rest)
    if namespace == PYTHON:
        module, _, qualname = rest.rpartition(".")
        # Methods of classes (e.g. `_operator.index`) are reached attribute by attribute.
        obj: Any = None
        parts = rest.split(".")
        for i in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                obj = getattr(obj, attr)
            return obj
        raise ImportError(f"no module for {name!r} ({module}.{qualname})")
    from vllm_xdsl.dialects.torch import resolve_overload

    return resolve_overload(name)
