"""Compile one corpus case with `backend="vllm_xdsl"` (inner="eager") and measure it.

Counts come from the pipeline's own records (`vllm_xdsl.compile.RESULTS`: op counts after
each pass, per compiled graph), never from printed IR. The aten graphs the backend
received are kept (by wrapping `vllm_xdsl.compile.transform` for the duration) for the
`sites.graph_sites` cross-check. A fallback is the backend's one warning on the
`vllm_xdsl` logger. The quant variants each graph was raised to are read off the module
after raise-native (by wrapping `vllm_xdsl.pipeline.apply_pass` likewise).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch import nn

from corpus import decomps
from corpus.sites import Sites, graph_sites, raised_sites
from vllm_xdsl import compile as backend
from vllm_xdsl import pipeline
from vllm_xdsl.ops.tolerance import contract_error

# Whole-model tolerance of docs/OPS.md (a compiled model vs the same model in eager mode,
# atol = rtol); OPS.md gives none for f32, where the per-op f32 tolerance is used.
WHOLE_MODEL_TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
LABELS = ("norm", "add", "act", "quant", "fused")  # the Sites fields, as the table names them


@dataclass
class Built:
    """A model ready to compile, with its inputs and its ground-truth sites.

    `outputs` says how each output is compared: "model" (whole-model tolerance), "value"
    (the per-op tolerance of its dtype, fp8 included) or "scales". `sites` is None where
    raised ops cannot be matched to sites: when Dynamo splits the model into graphs that it
    reuses for several calls (compressed-tensors' stock forward), a raised op in a reused
    graph covers several sites."""

    model: nn.Module
    args: tuple[Any, ...]
    sites: Sites | None
    outputs: tuple[str, ...] = ("model",)
    token_dims: tuple[int | None, ...] = (0,)  # per arg: the dim marked dynamic, as vLLM does

    def graph_expected(self) -> Sites | None:
        """What `sites.graph_sites` must find: the norm, residual and quant sites (it
        counts no acts or pairs)."""
        s = self.sites
        return None if s is None else Sites(s.norm, s.residual, 0, s.quant, 0)


# How a case's shapes are made dynamic: "token", the token dim of each input marked
# (`mark_dynamic`, as vLLM does), or "all", `torch.compile(dynamic=True)` (as many users
# write it): every dim symbolic, and float attributes (epsilons, compressed-tensors' fp8
# range) no longer specialized, so the aten graph spells them differently.
SHAPES = ("token", "all")


@dataclass(frozen=True)
class Case:
    family: str  # "hf", "ct" or "vllm"
    name: str
    dtype: torch.dtype
    build: Callable[[torch.dtype], Built] = field(compare=False)
    shapes: str = "token"  # one of SHAPES

    @property
    def key(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.").replace("bfloat16", "bf16").replace("float32", "f32")
        return f"{self.name}/{dtype}" + ("/dynamic" if self.shapes == "all" else "")


@dataclass
class Row:
    case: Case
    total: Sites | None  # None: per compiled graph, no totals (see Built)
    raised: Sites  # raised per type; `pairs` = fused ops formed
    graph: Sites  # the aten-graph cross-check (norm, residual, quant)
    graph_expected: Sites | None
    graphs: int
    fallbacks: list[str]
    max_error: float
    bit_exact: bool
    tolerance_problem: str | None
    seconds: float  # the whole measurement: build, compile, run
    pipeline_seconds: float  # of which in vllm_xdsl's import, passes and export
    # Not bit-exact, but bit-exact once this decomposition (corpus.decomps.INEXACT) is not
    # applied: the difference is torch's decomposition, not the pipeline's.
    inexact_from: str | None = None
    # The quant ops after raise-native with their variants (`op.name #vllm.quant_variant<..>`
    # or `op.name default`), graph by graph in compile order.
    variants: list[str] = field(default_factory=list)

    def expectation(self) -> str:
        """The row as test/corpus/expected.py spells it."""
        cells = " ".join(f"{label} {cell}" for label, cell in zip(LABELS, self.cells(), strict=True))
        return f"{cells} graphs {self.graphs} {self.exactness()}"

    def exactness(self) -> str:
        """`exact`, `close`, or `close (<name> decomposition)` (see inexact_from)."""
        exactness = "exact" if self.bit_exact else "close"
        if self.inexact_from:
            exactness += f" ({self.inexact_from} decomposition)"
        return exactness

    def cells(self) -> list[str]:
        """raised/total per site type, then fused/possible ("-": no totals)."""
        raised = self.raised.astuple()
        total = self.total.astuple() if self.total else ("-",) * len(raised)
        return [f"{r}/{t}" for r, t in zip(raised, total, strict=True)]


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _quant_variants(module: Any) -> list[str]:
    """Each quant op's name and variant (absent: the default one, docs/OPS.md)."""
    return [f"{op.name} {op.properties.get('variant', 'default')}" for op in module.walk()
            if op.name.startswith("vllm.") and op.name.endswith("_quant")]


@dataclass
class Recorded:
    graphs: list[Sites] = field(default_factory=list)  # counted before the pipeline runs
    warnings: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # in the pipeline, per graph
    variants: list[str] = field(default_factory=list)  # after raise-native (Row.variants)


@contextmanager
def recording() -> Iterator[Recorded]:
    """While active: the sites of each aten graph handed to the pipeline, the backend's
    warnings, the seconds spent in the pipeline and the quant variants raised."""
    recorded = Recorded()
    original = backend.transform
    original_apply = pipeline.apply_pass

    def apply_pass(p: Any, ctx: Any, module: Any) -> Any:
        report = original_apply(p, ctx, module)
        if p.name == "raise-native":
            recorded.variants += _quant_variants(module)
        return report

    def transform(gm: torch.fx.GraphModule, options: Any, **kwargs: Any) -> torch.fx.GraphModule:
        recorded.graphs.append(graph_sites([gm]))
        start = time.perf_counter()
        try:
            return original(gm, options, **kwargs)
        finally:
            recorded.seconds.append(time.perf_counter() - start)

    handler = _Warnings()
    recorded.warnings = handler.messages
    logger = logging.getLogger("vllm_xdsl")
    logger.addHandler(handler)
    backend.transform, pipeline.apply_pass = transform, apply_pass
    try:
        yield recorded
    finally:
        backend.transform, pipeline.apply_pass = original, original_apply
        logger.removeHandler(handler)


def _outputs(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [v for v in value if isinstance(v, torch.Tensor)]


def _compare(got: list[torch.Tensor], want: list[torch.Tensor], kinds: tuple[str, ...],
             dtype: torch.dtype) -> tuple[float, bool, str | None]:
    if len(got) != len(want) or len(want) != len(kinds):
        return float("inf"), False, f"{len(got)} outputs, expected {len(want)}"
    error, exact, problems = 0.0, True, []
    for i, (g, w, kind) in enumerate(zip(got, want, kinds, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"output {i}: {g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)}")
            exact = False
            continue
        error = max(error, (g.double() - w.double()).abs().max().item() if w.numel() else 0.0)
        exact = exact and torch.equal(g, w)
        if kind == "model" and w.dtype in WHOLE_MODEL_TOL:
            tol = WHOLE_MODEL_TOL[w.dtype]
            bad = (g.double() - w.double()).abs() > tol + tol * w.double().abs()
            problem = f"{int(bad.sum())} values outside atol=rtol={tol}" if bad.any() else None
        else:
            problem = contract_error(g, w, kind="scales" if kind == "scales" else "value")
        if problem:
            problems.append(f"output {i}: {problem}")
    return error, exact, "; ".join(problems) or None


def _compile(model: nn.Module, shapes: str, options: dict[str, Any]) -> Callable[..., Any]:
    """`backend="vllm_xdsl"`, with dynamic=True for the "all" shapes (the "token" dims are
    marked on the inputs, see `measure`)."""
    dynamic = {"dynamic": True} if shapes == "all" else {}
    return torch.compile(model, backend="vllm_xdsl", options=options, **dynamic)


def _inexact_from(built: Built, shapes: str, want: list[torch.Tensor]) -> str | None:
    """The decomposition of corpus.decomps.INEXACT without which the compiled model equals
    eager bit for bit, if there is one."""
    for name, op in decomps.INEXACT.items():
        torch._dynamo.reset()
        with decomps.without_decomposition(op), torch.no_grad():  # strict: no fallback
            compiled = _compile(built.model, shapes, {"inner": "eager", "strict": True})
            got = _outputs(compiled(*built.args))
        if len(got) == len(want) and all(
                g.dtype == w.dtype and torch.equal(g, w) for g, w in zip(got, want, strict=True)):
            return name
    return None


def measure(case: Case) -> Row:
    """Build, compile (dynamic shapes as `case.shapes` says, inner="eager"), run once,
    count, compare; if not bit-exact, whether a decomposition of torch's explains it
    (`Row.inexact_from`)."""
    if case.shapes not in SHAPES:
        raise ValueError(f"corpus: shapes {case.shapes!r} is none of {SHAPES}")
    start = time.perf_counter()
    built = case.build(case.dtype)
    torch._dynamo.reset()  # a fresh compile per case (Dynamo caches by code object)
    if case.shapes == "token":
        for arg, dim in zip(built.args, built.token_dims, strict=True):
            if dim is not None:
                torch._dynamo.mark_dynamic(arg, dim)
    mark = backend.RESULTS.count
    with recording() as recorded, torch.no_grad():
        compiled = _compile(built.model, case.shapes, {"inner": "eager"})
        got = _outputs(compiled(*built.args))
        want = _outputs(built.model(*built.args))
    results = backend.RESULTS.since(mark)
    raised = Sites()
    for result in results:
        counts = {stage.name: stage.op_counts for stage in result.stages}
        raised += raised_sites(counts.get("raise-native", Counter()),
                               counts.get("fuse-norm-quant", Counter()))
    error, exact, problem = _compare(got, want, built.outputs, case.dtype)
    inexact_from = None if exact else _inexact_from(built, case.shapes, want)
    return Row(case, built.sites, raised, sum(recorded.graphs, Sites()), built.graph_expected(),
               len(recorded.graphs), list(recorded.warnings), error, exact, problem,
               time.perf_counter() - start, sum(recorded.seconds), inexact_from,
               recorded.variants)
