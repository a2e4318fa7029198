"""How `torch.call` names its target, and the callable a name denotes.

`aten::add.Tensor` for op overloads, `higher_order::auto_functionalized` for higher-order
ops and `python::_operator.mul` for the Python functions of size arithmetic (operator.*,
math.*, torch.sym_*). The importer writes these names (frontend/targets.py) and the
exporter resolves them (backends/torch_export): both read this one definition.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

PYTHON = "python"
HIGHER_ORDER = "higher_order"


def resolve_target(name: str) -> Any:
    """The callable a target name denotes (the inverse of frontend.targets.target_name)."""
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
