"""The dialects of vllm-xdsl, one module each, loaded lazily by name."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect

# Dialect name -> (module, attribute). Builtin, func and arith come from xDSL.
DIALECT_MODULES: dict[str, tuple[str, str]] = {
    "builtin": ("xdsl.dialects.builtin", "Builtin"),
    "func": ("xdsl.dialects.func", "Func"),
    "arith": ("xdsl.dialects.arith", "Arith"),
    "vllm": ("vllm_xdsl.dialects.vllm", "Vllm"),
    "torch": ("vllm_xdsl.dialects.torch", "Torch"),
    "triton": ("vllm_xdsl.dialects.triton", "Triton"),
    "cuda": ("vllm_xdsl.dialects.cuda", "Cuda"),
    "rocm": ("vllm_xdsl.dialects.rocm", "Rocm"),
    "cpu": ("vllm_xdsl.dialects.cpu", "Cpu"),
    "auto": ("vllm_xdsl.dialects.auto", "Auto"),  # runtime selection (autotuning)
}


def _loader(module: str, attr: str) -> Callable[[], Dialect]:
    return lambda: getattr(importlib.import_module(module), attr)


def dialect_factories() -> dict[str, Callable[[], Dialect]]:
    return {name: _loader(module, attr) for name, (module, attr) in DIALECT_MODULES.items()}


def make_context() -> Context:
    """A context in which every dialect of the project is registered (loaded on first use)."""
    ctx = Context()
    for name, factory in dialect_factories().items():
        ctx.register_dialect(name, factory)
    return ctx
