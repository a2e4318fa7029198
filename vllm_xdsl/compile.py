"""The `torch.compile` backend: `torch.compile(model, backend="vllm_xdsl", options={...})`.

Dynamo graph -> AOTAutograd (functional aten graph, Inductor's decompositions) -> import
-> passes (vllm_xdsl.pipeline) -> export -> inner compiler. The passes run on the graph
AOTAutograd hands to Inductor, before Inductor's own post-grad passes, in the place where
vLLM installs its post-grad passes; Inductor (`compile_fx_inner`) then generates code for
the rest of the graph and for the native lowerings. Doing it as a forward compiler rather
than as an Inductor `post_grad_custom_post_pass` keeps one pipeline for both inner
compilers (`inner="eager"` runs the exported graph as is) and lets a failure fall back to
the untouched graph.

Options (vllm_xdsl.backend_options): inner ("inductor" | "eager"), passes (list of pass
names), priority (VLLM_XDSL_PRIORITY syntax), target ("cuda" | "rocm" | "cpu"), strict
(bool), pass_options ({pass: {option: value}}). A bad option raises OptionsError (one line)
before any work; an internal failure logs ONE warning naming the stage and runs the
unmodified graph (strict raises).

With inner="inductor" the compilers return Inductor's OutputCode, which AOTAutograd's cache
stores and a later process loads without calling them; cache_key.py puts what our passes
depend on into the key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import torch
import torch.fx

from vllm_xdsl.backend_options import INNER as INNER  # re-exported: the public names
from vllm_xdsl.backend_options import BackendOptions
from vllm_xdsl.backend_options import OptionsError as OptionsError
from vllm_xdsl.pipeline_options import DUMP_ENV, PipelineOptions, StageError

if TYPE_CHECKING:
    from vllm_xdsl.pipeline import PipelineResult

# The passes (vllm_xdsl.pipeline, xDSL) are imported by the first transform: a process
# whose graphs all come from torch's compile caches never imports them.

logger = logging.getLogger("vllm_xdsl")


T = TypeVar("T")


class PipelineLog(Generic[T]):
    """The latest entries (newest last) and how many were added in all."""

    def __init__(self, keep: int = 64) -> None:
        self._items: deque[T] = deque(maxlen=keep)
        self.count = 0

    def add(self, result: T) -> None:
        self._items.append(result)
        self.count += 1

    def since(self, mark: int) -> list[T]:
        """The entries added after `count` was `mark`."""
        n = min(self.count - mark, len(self._items))
        return list(self._items)[len(self._items) - n:] if n > 0 else []

    @property
    def last(self) -> T:
        return self._items[-1]

    # List-like view by absolute index (len = graphs compiled so far; old ones evicted):
    # `mark = len(RESULTS); ...; RESULTS[mark:]` works as with a list.
    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            if index.step not in (None, 1) or index.stop is not None:
                raise IndexError("PipelineLog supports [start:] slices only")
            start = index.start or 0
            return self.since(start if start >= 0 else self.count + start)
        return self._items[index] if index < 0 else self._items[index - self.count + len(self._items)]


@dataclasses.dataclass(frozen=True)
class Fallback:
    """A graph that ran unmodified: the stage that failed and its error ("Type: message")."""

    stage: str
    error: str


# Read by the demo and the tests: the pipeline result of every transformed graph, and every
# graph left unmodified after a failure (by the backend or the post-grad pass), so that a
# caller such as a test inside vLLM counts fallbacks without parsing log lines.
RESULTS: PipelineLog[PipelineResult] = PipelineLog()
FALLBACKS: PipelineLog[Fallback] = PipelineLog()


def record_fallback(stage: str, cause: BaseException) -> None:
    """Count one graph left unmodified (the caller logs the warning)."""
    FALLBACKS.add(Fallback(stage, f"{type(cause).__name__}: {cause}"))


class InductorForward:
    """Inductor's own forward step after AOTAutograd, as plain `backend="inductor"` runs it
    (`compile_fx_forward`): on an inference graph its joint-graph passes, then output
    strides and static inputs for `compile_fx_inner`. Calling compile_fx_inner alone made
    the post-grad passes redo the joint-graph rewrites, and each rewrite re-ran fake-tensor
    propagation through every node downstream (measured: 161 of 279 nodes at 2 layers)."""

    def __init__(self, dynamo_gm: torch.fx.GraphModule, num_inputs: int) -> None:
        from torch._inductor.compile_fx import (
            compile_fx_forward,
            create_compiler_config_extra,
            get_num_model_outputs,
        )

        self.compile_fx_forward = compile_fx_forward  # ImportError here: not in this torch
        self.num_outputs = get_num_model_outputs(dynamo_gm)
        self.num_inputs = num_inputs
        self.extra = create_compiler_config_extra(dynamo_gm)

    def __call__(
        self, gm: torch.fx.GraphModule, example_inputs: list[Any], is_inference: bool
    ) -> Callable:
        from torch._guards import detect_fake_mode
        from torch._inductor.compile_fx import compile_fx_inner
        from torch._inductor.virtualized import V

        fake_mode = detect_fake_mode(example_inputs)
        with V.set_fake_mode(fake_mode) if fake_mode is not None else contextlib.nullcontext():
            return self.compile_fx_forward(
                gm, example_inputs, num_orig_model_outputs=self.num_outputs,
                num_example_inputs=self.num_inputs, compiler_config_extra=self.extra,
                inner_compile=compile_fx_inner, is_inference=is_inference,
            )


def _inductor_forward(dynamo_gm: torch.fx.GraphModule, num_inputs: int) -> InductorForward | None:
    """Inductor's forward step, or None on a torch without it (`compile_fx_forward` and its
    helpers are internal to Inductor): then compile_fx_inner alone, as before."""
    try:
        return InductorForward(dynamo_gm, num_inputs)
    except ImportError:
        return None


def _inner_compile(
    inner: str, gm: torch.fx.GraphModule, example_inputs: list[Any],
    inductor: InductorForward | None = None, is_inference: bool = False,
) -> Callable:
    if inner == "eager":
        from torch._functorch.aot_autograd import make_boxed_func

        return make_boxed_func(gm)  # AOTAutograd's calling convention (a list of args)
    if inductor is not None:
        return inductor(gm, example_inputs, is_inference)
    from torch._inductor.compile_fx import compile_fx_inner

    return compile_fx_inner(gm, example_inputs)


def transform(
    gm: torch.fx.GraphModule, options: PipelineOptions, decompose: bool = True
) -> torch.fx.GraphModule:
    """Import, run the passes, export: the new GraphModule (StageError on failure).
    `decompose`: spell ops the passes created as AOTAutograd does (what Inductor expects);
    the eager inner compiler runs them as written (aten.silu is what eager runs)."""
    from vllm_xdsl.backends.torch_export import export_module
    from vllm_xdsl.frontend import import_graph
    from vllm_xdsl.pipeline import Dumper, run_pipeline

    dumper = Dumper.from_env(getattr(gm, "_vllm_xdsl_name", "graph"))
    # Verified once after the passes; a dump shows each pass, so it verifies after each.
    once = dataclasses.replace(options, verify_each=dumper is not None)
    stage = "import"
    try:
        start = time.perf_counter()
        imported = import_graph(gm)
        imported_at = time.perf_counter()
        try:
            result = run_pipeline(imported.module, once, dumper)
        except StageError as e:
            if once.verify_each:
                raise
            named = _failing_pass(gm, options, e)
            raise named from named.cause
        stage = "export"
        exporting_at = time.perf_counter()
        values = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        exported = export_module(imported.module, gm, values, decompose)
        result.seconds["import"] = imported_at - start
        result.seconds["export"] = time.perf_counter() - exporting_at
    except StageError:
        raise
    except Exception as e:
        raise StageError(stage, e) from e
    RESULTS.add(result)
    return exported


def _failing_pass(gm: torch.fx.GraphModule, options: PipelineOptions, error: StageError
                  ) -> StageError:
    """The error of the pipeline run again verifying after every pass: the first pass
    whose IR does not verify, not a later one that tripped over it; `error` if the replay
    does not fail (the cost of a failure, never of a success)."""
    from vllm_xdsl.frontend import import_graph
    from vllm_xdsl.pipeline import run_pipeline

    try:
        run_pipeline(import_graph(gm).module, dataclasses.replace(options, verify_each=True))
    except StageError as named:
        return named
    except Exception:  # the replay's own trouble must not hide the first error
        return error
    return error


def device_target(example_inputs: list[Any]) -> str:
    """The dispatch target of the graph's tensors: cuda/rocm on a GPU, else cpu."""
    for value in example_inputs:
        if isinstance(value, torch.Tensor) and value.device.type == "cuda":
            return "rocm" if torch.version.hip else "cuda"
    return "cpu"


class ForwardCompiler:
    """AOTAutograd's forward/inference compiler: transform, then the inner compiler."""

    def __init__(
        self, options: BackendOptions, inductor: InductorForward | None = None,
        is_inference: bool = False,
    ) -> None:
        self.options = options
        self.inductor = inductor
        self.is_inference = is_inference

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        options = self.options.pipeline
        if options.target is None:
            options = dataclasses.replace(options, target=device_target(example_inputs))
        try:
            new_gm = transform(gm, options, decompose=self.options.inner == "inductor")
        except StageError as e:
            return self._fall_back(e.stage, e.cause, gm, example_inputs)
        try:
            return self._compile(new_gm, example_inputs)
        except Exception as e:  # the original graph compiles: the transform broke it
            return self._fall_back(f"{self.options.inner} compile", e, gm, example_inputs)

    def _fall_back(
        self, stage: str, cause: BaseException, gm: torch.fx.GraphModule, example_inputs: list[Any]
    ) -> Callable:
        if self.options.strict:
            raise RuntimeError(f"vllm_xdsl: {stage} failed: {cause}") from cause
        record_fallback(stage, cause)
        logger.warning(
            "vllm_xdsl: %s failed (%s: %s); running the unmodified graph",
            stage, type(cause).__name__, cause,
        )
        logger.debug("vllm_xdsl: %s failure", stage, exc_info=cause)
        return self._compile(gm, example_inputs)

    def _compile(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        return _inner_compile(
            self.options.inner, gm, example_inputs, self.inductor, self.is_inference
        )


def _serializable(compiler: Callable[..., Any]) -> Callable[..., Any]:
    """The compiler as AOTAutograd's cache wants it: marked as returning Inductor's
    OutputCode (what compile_fx_forward and compile_fx_inner return), which it stores."""
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
    from torch._inductor.output_code import OutputCode

    return SerializableAOTDispatchCompiler(OutputCode, compiler)


def _shows_its_work(options: BackendOptions) -> bool:
    """Whether the user asked to see what the passes did (IR dumps, the dispatch report):
    then every graph goes through them, never through torch's compile caches."""
    report = options.pipeline.pass_options.get("lower-dispatch", {}).get("report", (False,))
    return bool(os.environ.get(DUMP_ENV)) or any(report)


def vllm_xdsl_backend(
    gm: torch.fx.GraphModule, example_inputs: list[Any], options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Callable:
    """The Dynamo backend registered as "vllm_xdsl" (entry point torch_dynamo_backends)."""
    parsed = BackendOptions.parse(options)  # first: a typo fails before any work
    from vllm_xdsl.frontend.capture import aot_backend

    inductor = _inductor_forward(gm, len(example_inputs)) if parsed.inner == "inductor" else None
    forward: Callable = ForwardCompiler(parsed, inductor)
    inference: Callable = ForwardCompiler(parsed, inductor, is_inference=True)
    inner = parsed.inner

    def backward(bw_gm: torch.fx.GraphModule, bw_inputs: list[Any]) -> Callable:
        return _inner_compile(inner, bw_gm, bw_inputs)

    if inner != "inductor" or _shows_its_work(parsed):
        return aot_backend(forward, backward, inference)(gm, example_inputs)
    from vllm_xdsl.cache_key import keyed_config

    with keyed_config(parsed) as cacheable:
        if cacheable:
            forward, inference, backward = map(_serializable, (forward, inference, backward))
        return aot_backend(forward, backward, inference)(gm, example_inputs)
