"""FX graph -> IR, split as torch-mlir's importer is: module import (module.py), type
conversion (types.py, literals.py, targets.py) and node import (nodes.py, semantic.py).

    from vllm_xdsl.frontend import import_graph, capture
    gm = capture(model, x, dynamic=True)      # the graph the torch.compile backend sees
    imported = import_graph(gm)               # .module: builtin.module with one func.func
"""

from vllm_xdsl.frontend.capture import capture
from vllm_xdsl.frontend.module import ImportedGraph, import_graph
from vllm_xdsl.frontend.types import FrontendError

__all__ = ["FrontendError", "ImportedGraph", "capture", "import_graph"]
