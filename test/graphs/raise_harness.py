"""Compile a model with a backend that imports its aten graph, runs raise-native, exports
the result and, on every call, runs both the original and the raised graph on the same
inputs, so tests compare what the raised ops compute with what the graph computed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from vllm_xdsl.backends.torch_export import export_module
from vllm_xdsl.dialects import make_context
from vllm_xdsl.frontend import import_graph
from vllm_xdsl.frontend.capture import aot_backend
from vllm_xdsl.ops.tolerance import contract_error
from vllm_xdsl.transforms.raising.raise_native import RaiseNativePass


@dataclass
class RaiseRun:
    """What one compile produced: IR before/after the pass, op counts, per-call problems."""

    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    bitwise: list[bool] = field(default_factory=list)
    calls: int = 0


# OPS.md whole-model tolerance (atol = rtol) of a compiled model against eager.
MODEL_TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1.3e-6}


def _compare(expected: Any, got: Any, kind: str) -> str | None:
    if not isinstance(expected, torch.Tensor):
        return None if expected == got else f"{got!r} != {expected!r}"
    if kind == "model":
        tol = MODEL_TOLERANCE[expected.dtype]
        if got.dtype != expected.dtype or got.shape != expected.shape:
            return f"{got.dtype}{tuple(got.shape)} vs {expected.dtype}{tuple(expected.shape)}"
        err = (got.double() - expected.double()).abs() - tol * expected.double().abs()
        return None if bool((err <= tol).all()) else f"max error {err.max().item() + tol:.4g}"
    if kind == "norm" and expected.dtype != torch.float16:
        kind = "value"
    return contract_error(got, expected, kind=kind)  # type: ignore[arg-type]


def _equal(a: Any, b: Any) -> bool:
    if not isinstance(a, torch.Tensor):
        return a == b
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.itemsize == 1:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return torch.equal(a, b)


def raise_backend(
    run: RaiseRun, exact: bool, kinds: Sequence[str]
) -> Callable:
    def fw(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        imported = import_graph(gm)
        run.before.append(str(imported.module))
        RaiseNativePass(exact=exact).apply(make_context(), imported.module)
        imported.module.verify()
        text = str(imported.module)
        run.after.append(text)
        for line in text.splitlines():
            if "= vllm." in line:
                run.counts[line.split("= vllm.")[1].split()[0]] += 1
        vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        exported = export_module(imported.module, gm, vals)

        def call(*args: Any) -> Any:
            expected, got = gm(*args), exported(*args)
            run.calls += 1
            run.bitwise.append(all(_equal(e, g) for e, g in zip(expected, got, strict=True)))
            for i, (e, g) in enumerate(zip(expected, got, strict=True)):
                kind = kinds[i] if i < len(kinds) else "value"
                if (problem := _compare(e, g, kind)) is not None:
                    run.problems.append(f"output {i}: {problem}")
            return got

        return call

    return aot_backend(fw)


def compile_and_run(
    model: torch.nn.Module,
    make_inputs: Callable[[int], Sequence[torch.Tensor]],
    form: str,
    *,
    exact: bool = False,
    kinds: Sequence[str] = (),
    tokens: Sequence[int] = (3, 17, 5),
) -> RaiseRun:
    """Compile once (`form` = "dynamic" or "mark_dynamic") and call at each token count."""
    torch._dynamo.reset()
    run = RaiseRun()
    compiled = torch.compile(
        model, backend=raise_backend(run, exact, kinds),
        dynamic=True if form == "dynamic" else None, fullgraph=True,
    )
    with torch.no_grad():
        for t in tokens:
            args = list(make_inputs(t))
            if form == "mark_dynamic":
                for a in args:
                    torch._dynamo.mark_dynamic(a, 0)
            compiled(*args)
    return run
