"""raise-native on a function's traced graph, and what the raised graph computes: for the
tests of the raise patterns that compare a raised graph's output with the original's."""

from __future__ import annotations

from typing import Any

import torch
from xdsl.dialects.builtin import ModuleOp

from vllm_xdsl.backends.torch_export import export_module
from vllm_xdsl.dialects import make_context
from vllm_xdsl.frontend import capture, import_graph
from vllm_xdsl.frontend.capture import aot_backend
from vllm_xdsl.transforms.raising.raise_native import RaiseNativePass


def raised_native(fn: Any, x: torch.Tensor) -> tuple[list[str], torch.Tensor]:
    """raise-native on `fn`'s traced graph (dim 0 dynamic): its semantic ops, and the
    exported graph's output."""
    gm = capture(fn, x, dynamic=None, mark_dynamic={0: 0})
    imported = import_graph(gm)
    RaiseNativePass().apply(make_context(), imported.module)
    names = [str(op) for op in imported.module.walk() if op.name.startswith("vllm.")]
    values = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    exported = export_module(imported.module, gm, values)
    args = (x,) if len(values) == 1 else (x.shape[0], x)  # the token count first, if taken
    (out,) = exported(*args)
    return names, out


def raised_run(fn: Any, args: tuple, exact: bool = False) -> tuple[ModuleOp, list, list]:
    """Compile `fn` with raise-native inside: the raised module, and the captured graph's
    and the raised graph's outputs on the same call."""
    seen: dict[str, object] = {}

    def fw(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        imported = import_graph(gm)
        RaiseNativePass(exact=exact).apply(make_context(), imported.module)
        vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        exported = export_module(imported.module, gm, vals)
        seen["module"] = imported.module

        def call(*a: object) -> object:
            seen["expected"], seen["got"] = list(gm(*a)), list(exported(*a))
            return seen["got"]
        return call

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=aot_backend(fw), dynamic=False, fullgraph=True)(*args)
    return seen["module"], seen["expected"], seen["got"]  # type: ignore[return-value]
