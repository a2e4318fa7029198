"""Semantic ops back to torch: `vllm.<op>` -> `torch.ops.vllm_xdsl.<op>`, a provider op
`<provider>.<op>` -> `torch.ops.vllm_xdsl_<provider>.<op>`, with the native's arguments
(read by the one IR <-> native binding, dialects/binding.py).

Provider torch ops are resolved at export time (their backends register them when
imported), so a missing one is a clear ExportError naming the op and provider.
Implementation properties (block_size, vec_width, ...) are the kernel's business and are
not torch arguments.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from vllm_xdsl.dialects.vllm import SemanticSignature

from .literals import ExportError

# Where each provider registers its torch ops (imported on first use), in order.
PROVIDER_MODULES = ("vllm_xdsl.backends.{}.torch_ops", "vllm_xdsl.backends.{}")
# The rocm and cpu kernels share the cuda launchers and op definitions (torch_ops.define).
_MODULE_OF = {"rocm": "vllm_xdsl.backends.cuda.torch_ops",
              "cpu": "vllm_xdsl.backends.cuda.torch_ops"}


def provider_of(op: SemanticSignature) -> str:
    return op.name.split(".", 1)[0]


def torch_overload(op: SemanticSignature) -> torch._ops.OpOverload:
    """The torch op a semantic or provider op calls."""
    provider = provider_of(op)
    name = op.SEMANTIC_NAME
    namespace = "vllm_xdsl" if provider == "vllm" else f"vllm_xdsl_{provider}"
    if provider == "vllm":
        import vllm_xdsl.ops  # noqa: F401  (registers torch.ops.vllm_xdsl)
    packet = _find(namespace, name)
    if packet is None and provider != "vllm":
        _load(provider)
        packet = _find(namespace, name)
    if packet is None:
        raise ExportError(
            f"{op.name}: torch op {namespace}::{name} is not registered "
            f"(is the {provider} backend installed and importable?)"
        )
    return packet.default


def _find(namespace: str, name: str) -> Any:
    try:
        return getattr(getattr(torch.ops, namespace), name)
    except (AttributeError, RuntimeError):
        return None


def _load(provider: str) -> None:
    candidates = [_MODULE_OF[provider]] if provider in _MODULE_OF else []
    for name in candidates + [p.format(provider) for p in PROVIDER_MODULES]:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        # cuda/rocm register their ops per vendor on demand: torch_ops.define(vendor).
        define = getattr(module, "define", None)
        if callable(define):
            define(provider)
        return


def result_indices(op: SemanticSignature) -> list[int]:
    """For each IR result of the op, the index of that output in the torch op's results."""
    from vllm_xdsl import ops

    outputs = ops.ALL_OPS[op.SEMANTIC_NAME].outputs
    names = [name for name, _ in type(op).get_irdl_definition().results]
    present = [name for name in names if getattr(op, name) is not None]
    return [outputs.index(name) for name in present]
