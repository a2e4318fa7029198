"""Inlining a function traced into aten ops with Inductor's decompositions.

Used for:
- an unlowered semantic op whose epsilon is a runtime tensor. `torch.ops.vllm_xdsl.*` take
  epsilon as a float; reading the tensor with `.item()` would give Inductor an unbacked
  float. The native computes `var + epsilon`, which is the same with a 0-d f64 tensor (a
  0-d tensor does not promote the f32 variance), so the native is traced with the tensor
  as epsilon and inlined: same numerics, fusable, nothing baked into the graph;
- a `torch.call` that a pass created with an op Inductor expects decomposed (e.g.
  `aten.clamp`, which Inductor lowers only as clamp_min/clamp_max): the graph handed to
  Inductor must look like AOTAutograd's output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.utils import _pytree as pytree

from .literals import ExportError
from .meta import FakeRunner


def decomposition_table() -> dict[Any, Callable[..., Any]]:
    from torch._inductor.decomposition import select_decomp_table

    return select_decomp_table()


TraceCache = dict[Any, torch.fx.GraphModule]


def inline_traced(
    graph: torch.fx.Graph, fn: Callable[..., Any], args: Any, fake: FakeRunner, what: str,
    cache: TraceCache | None = None,
) -> list[torch.fx.Node]:
    """Trace `fn(*args)` (nodes anywhere in `args`) into aten ops, inline it, its outputs.

    With `cache` (one per exported graph), a trace is reused for the same `what`, function,
    literals and input metadata (every layer of a model repeats the same few): the copy's
    nodes get fake values of their own (make_fx per op costs ~10x a fake run).
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    if fake.mode is None:
        raise ExportError(f"{what}: tracing it needs the example values of the graph")
    leaves, spec = pytree.tree_flatten(args)
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.fx.Node)]
    nodes = [leaves[i] for i in positions]
    if any("val" not in n.meta for n in nodes):
        raise ExportError(f"{what}: an input has no fake value to trace with")
    key = _trace_key(fn, what, leaves, spec, nodes) if cache is not None else None
    sub = cache.get(key) if cache is not None and key is not None else None
    traced_now = sub is None
    if sub is None:

        def call(*values: Any) -> Any:
            full = list(leaves)
            for i, v in zip(positions, values, strict=True):
                full[i] = v
            return fn(*pytree.tree_unflatten(full, spec))

        with fake.mode:
            sub = make_fx(call, decomposition_table(), tracing_mode="real")(
                *[n.meta["val"] for n in nodes]
            )
        if cache is not None and key is not None:
            cache[key] = sub
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    copies = dict(zip(placeholders, nodes, strict=True))
    out = graph.graph_copy(sub.graph, copies)
    if not traced_now:  # never share a fake value between two nodes
        for n in sub.graph.nodes:
            if n.op == "call_function":
                fake.run(copies[n])
    outs: list[torch.fx.Node] = []
    for n in out if isinstance(out, (tuple, list)) else [out]:
        assert isinstance(n, torch.fx.Node), f"{what}: traced output {n!r} is not a node"
        outs.append(n)
    return outs


def _trace_key(
    fn: Callable[..., Any], what: str, leaves: list[Any], spec: Any, nodes: list[torch.fx.Node]
) -> Any:
    """What a trace depends on (None: not hashable, do not cache)."""
    from .meta import value_signature

    closure = tuple(c.cell_contents for c in getattr(fn, "__closure__", None) or ())
    key = (what, getattr(fn, "__code__", fn), closure, str(spec),
           tuple(None if isinstance(x, torch.fx.Node) else (type(x), repr(x)) for x in leaves),
           tuple(value_signature(n.meta["val"]) for n in nodes))
    try:
        hash(key)
    except TypeError:
        return None
    return None if any(s is None for s in key[-1]) else key


def inline_native(
    graph: torch.fx.Graph, name: str, args: dict[str, Any], fake: FakeRunner,
    cache: TraceCache | None = None,
) -> list[torch.fx.Node]:
    """Inline the native of semantic op `name` called with `args` (nodes or literals)."""
    from vllm_xdsl import ops

    native = ops.ALL_OPS[name].native
    return inline_traced(graph, native, list(args.values()), fake, name, cache)
