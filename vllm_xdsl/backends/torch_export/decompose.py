"""Export of an unlowered semantic op whose epsilon is a runtime tensor.

`torch.ops.vllm_xdsl.*` take epsilon as a float; reading the tensor with `.item()` would
give Inductor an unbacked float. The native contract computes `var + epsilon`, which is
the same with a 0-d f64 tensor (a 0-d tensor does not promote the f32 variance), so the
native is traced with the tensor as epsilon into aten ops (Inductor's decompositions)
and inlined: the same numerics, fusable, and nothing is baked into the graph.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from .literals import ExportError
from .meta import FakeRunner


def inline_native(
    graph: torch.fx.Graph, name: str, args: dict[str, Any], fake: FakeRunner
) -> list[torch.fx.Node]:
    """Inline the native of op `name` called with `args` (nodes or literals); its outputs."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    from vllm_xdsl import ops

    if not fake.enabled:
        raise ExportError(f"{name} with a runtime epsilon needs example values to trace")
    names = list(args)
    node_keys = [k for k in names if isinstance(args[k], torch.fx.Node)]
    native = ops.ALL_OPS[name].native

    def call(*tensors: Any) -> Any:
        full = dict(args)
        full.update(zip(node_keys, tensors, strict=True))
        return native(*full.values())

    fakes = [args[k].meta["val"] for k in node_keys]
    with fake.mode:
        sub = make_fx(call, select_decomp_table(), tracing_mode="real")(*fakes)
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    env = {p: args[k] for p, k in zip(placeholders, node_keys, strict=True)}
    out = graph.graph_copy(sub.graph, env)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return outs
