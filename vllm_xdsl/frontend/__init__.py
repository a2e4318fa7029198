"""FX graph -> IR, split as torch-mlir's importer is: module import (module.py), type
conversion (types.py, literals.py, targets.py) and node import (nodes.py, semantic.py).

    from vllm_xdsl.frontend import import_graph, capture
    gm = capture(model, x, dynamic=True)      # the graph the torch.compile backend sees
    imported = import_graph(gm)               # .module: builtin.module with one func.func

The importer (and xDSL with it) is loaded on first use: the backend needs only `capture`'s
AOTAutograd wiring when torch's caches serve every graph.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vllm_xdsl.frontend.capture import capture

if TYPE_CHECKING:
    from vllm_xdsl.frontend.module import ImportedGraph, import_graph
    from vllm_xdsl.frontend.types import FrontendError

__all__ = ["FrontendError", "ImportedGraph", "capture", "import_graph"]

_LAZY = {"ImportedGraph": "module", "import_graph": "module", "FrontendError": "types"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
