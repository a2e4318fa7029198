"""Our pipeline as an Inductor post-grad pass, the way into compilers that own the graph.

vLLM's default configuration compiles with Inductor and ignores a `torch.compile` backend;
what it does take is a post-grad pass:

    compilation_config={"inductor_compile_config":
                        {"post_grad_custom_post_pass": vllm_xdsl.post_grad_pass()}}

The pass imports Inductor's post-grad graph, runs our passes (raise-native, fuse-norm-quant,
lower-dispatch by default; the backend's options) and writes the result back into the same
graph (splice.py). Where vLLM is importable the pass is a vLLM `InductorPass`, which vLLM's
own pass manager requires of the passes it runs; else torch's `CustomGraphPass`.

Its `uuid()` is a string (Inductor's FX cache keys on it; bytes or None disable caching)
that covers all its output depends on: this package's version and sources, the options,
`ops.set_priority`, our environment variables, the registered providers, the tuning results
(cache_key.pipeline_identity). An internal failure leaves the graph untouched with one
warning (`strict=True` raises instead).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import logging
from functools import cache, lru_cache
from importlib import metadata
from typing import Any

import torch.fx

from vllm_xdsl.backend_options import POST_GRAD_OPTIONS, BackendOptions, OptionsError
from vllm_xdsl.pipeline_options import StageError

logger = logging.getLogger("vllm_xdsl")


@lru_cache(maxsize=1)
def _base() -> type:
    """vLLM's InductorPass where vLLM is installed (its pass manager asserts that type),
    else torch's CustomGraphPass. vLLM is imported only when a pass is made."""
    if importlib.util.find_spec("vllm") is not None:
        try:
            module = importlib.import_module("vllm.compilation.passes.inductor_pass")
            base: type = module.InductorPass
            return base
        except ImportError:  # a vLLM without that module: Inductor takes the plain type
            pass
    from torch._inductor.custom_graph_pass import CustomGraphPass

    return CustomGraphPass


def _version() -> str:
    try:
        return metadata.version("vllm-xdsl")
    except metadata.PackageNotFoundError:
        return "unknown"


def _device_target(graph: torch.fx.Graph) -> str:
    from vllm_xdsl.compile import device_target

    return device_target([n.meta.get("val") for n in graph.nodes if n.op == "placeholder"])


class _PostGradPass:
    """The pass's behaviour; `post_grad_pass` mixes it into the base vLLM or torch wants."""

    def __init__(self, options: BackendOptions) -> None:
        self.options = options

    def __call__(self, graph: torch.fx.Graph) -> None:
        from vllm_xdsl.compile import transform

        options = self.options.pipeline
        if options.target is None:
            options = dataclasses.replace(options, target=_device_target(graph))
        try:
            owner = graph.owning_module
            if owner is None:
                raise StageError("import", ValueError("the graph has no owning GraphModule"))
            new = transform(owner, options, decompose=True)
            from vllm_xdsl.backends.torch_export.splice import splice_graph

            try:
                splice_graph(graph, new.graph)
            except Exception as e:  # erased nodes cannot come back: Inductor must not go on
                raise RuntimeError(f"vllm_xdsl: splicing the post-grad graph failed: {e}") from e
        except StageError as e:
            if self.options.strict:
                raise RuntimeError(f"vllm_xdsl: {e.stage} failed: {e.cause}") from e.cause
            from vllm_xdsl.compile import record_fallback

            record_fallback(f"post-grad {e.stage}", e.cause)
            logger.warning("vllm_xdsl: post-grad pass: %s failed (%s: %s); graph left unchanged",
                           e.stage, type(e.cause).__name__, e.cause)
            logger.debug("vllm_xdsl: %s failure", e.stage, exc_info=e.cause)

    def uuid(self) -> str:
        from vllm_xdsl.cache_key import pipeline_identity

        return f"vllm_xdsl-post-grad-{_version()}-{pipeline_identity(self.options)}"


@cache
def _pass_class(base: type) -> type:
    return type("PostGradPass", (_PostGradPass, base), {"__module__": __name__})


def post_grad_pass(**options: Any) -> Any:
    """A post-grad pass running our pipeline; options as the torch.compile backend's
    (passes, priority, target, strict, pass_options; OptionsError with one line on a bad
    one, before any work)."""
    if "inner" in options:
        raise OptionsError("option 'inner' does not apply to the post-grad pass "
                           "(Inductor compiles the graph)")
    parsed = BackendOptions.parse(options, POST_GRAD_OPTIONS)
    return _pass_class(_base())(parsed)
