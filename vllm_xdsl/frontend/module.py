"""Module import: a functional aten-level FX graph -> `builtin.module` with one `func.func`.

Placeholders become the function's arguments, each node is imported in graph order
(frontend/nodes.py) and the output becomes `func.return`. IR objects are built directly
(no text on the compile path). Any node that cannot be represented exactly raises
FrontendError, so the caller can fall back instead of computing something else.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

from vllm_xdsl.frontend.nodes import NodeImporter
from vllm_xdsl.frontend.types import FrontendError


@dataclass
class ImportedGraph:
    """The module and its function; each op imported from an FX node is located at it
    (dialects/fx_location.py)."""

    module: ModuleOp
    func: func.FuncOp


def import_graph(
    gm: torch.fx.GraphModule | torch.fx.Graph, name: str = "forward"
) -> ImportedGraph:
    """Import `gm` (its get_attr constants are looked up on it) into a new module."""
    graph = gm.graph if isinstance(gm, torch.fx.GraphModule) else gm
    owner = gm if isinstance(gm, torch.nn.Module) else None
    block = Block()
    importer = NodeImporter(block, owner)
    results = None
    for node in graph.nodes:
        if node.op == "output":
            results = importer.output(node)
        elif node.op in ("placeholder", "get_attr", "call_function"):
            getattr(importer, node.op)(node)
        else:
            raise FrontendError(
                f"node {node.name}: '{node.op}' nodes are not in a functional aten graph"
            )
    if results is None:
        raise FrontendError("the graph has no output node")
    fn_type = func.FunctionType.from_lists(
        [a.type for a in block.args], [r.type for r in results]
    )
    fn = func.FuncOp(name, fn_type, Region(block))
    return ImportedGraph(ModuleOp([fn]), fn)
