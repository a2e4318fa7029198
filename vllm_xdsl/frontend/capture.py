"""The functional aten graph that the `vllm_xdsl` backend sees, for tests and passes.

Dynamo traces, AOTAutograd functionalizes and decomposes with Inductor's decomposition
table (so the graph is spelled as in Inductor: `prims.convert_element_type`, ...), and
input mutations stay in the graph as `copy_`, as under Inductor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

FwCompiler = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]


def aot_backend(
    fw_compiler: FwCompiler, bw_compiler: FwCompiler | None = None,
    inference_compiler: FwCompiler | None = None,
) -> Callable:
    """A Dynamo backend that hands `fw_compiler` (or `inference_compiler`, without grad)
    the functional aten graph."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.decomposition import select_decomp_table

    return aot_autograd(
        fw_compiler=fw_compiler,
        inference_compiler=inference_compiler or fw_compiler,
        bw_compiler=bw_compiler or fw_compiler,
        decompositions=select_decomp_table(),
        keep_inference_input_mutations=True,
    )


def capture(
    fn: Callable[..., Any],
    *args: Any,
    dynamic: bool | None = True,
    mark_dynamic: dict[int, int] | None = None,
) -> torch.fx.GraphModule:
    """Trace `fn(*args)` under no_grad into the one aten graph the backend would get.

    `mark_dynamic` maps argument index -> dim to mark dynamic (with dynamic=None, as
    torch.compile's mark_dynamic form is used). Raises if Dynamo splits the graph.
    """
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append(gm)
        return gm

    for index, dim in (mark_dynamic or {}).items():
        torch._dynamo.mark_dynamic(args[index], dim)
    compiled = torch.compile(fn, backend=aot_backend(keep), dynamic=dynamic, fullgraph=True)
    with torch.no_grad():
        compiled(*args)
    if len(graphs) != 1:
        raise RuntimeError(f"expected one graph, Dynamo produced {len(graphs)}")
    return graphs[0]
