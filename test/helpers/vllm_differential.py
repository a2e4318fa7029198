"""A torch.compile backend for vLLM that checks ours against the graph it was given: our
backend (the graph after our passes run eagerly: inner "eager"), and at every call the graph
Dynamo traced first, run eagerly on copies of the inputs, then ours on the inputs
themselves (so the engine goes on with our values). Each call's outputs are compared bit for
bit (NaN equal to NaN) and recorded in CALLS. Two kinds of call say nothing about our graph:
one vLLM runs without attention metadata (its profile run, the dummy first call), where
attention returns its output buffer unwritten, whatever that memory held
(vllm/v1/attention/backends/cpu_attn.py): `no_attention`; and one whose reference differs
from itself when the traced graph runs once more on fresh copies (done where a call
differs). Attention's KV cache then holds the reference's writes of that call.

vLLM resolves the backend by its qualified name (compilation mode 2, DYNAMO_TRACE_ONCE):
`vllm_differential.differential_backend`, with this directory on the path and
VLLM_USE_AOT_COMPILE=0 (vLLM's AOT compile wants a serializable compiled graph; the
wrapper is not one). VLLM_XDSL_PRIORITY picks the lowering, as for our own backend.
"""

from __future__ import annotations

import os
from typing import Any

QUALNAME = "vllm_differential.differential_backend"
CALLS: list[dict[str, Any]] = []  # per call of a compiled graph: its outputs compared


def _tensors(x: Any) -> list[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, list | tuple):
        return [t for y in x for t in _tensors(y)]
    return []


def differing(a: Any, b: Any) -> int:
    """How many values of two tensors are not the same bits (all of them where the shapes or
    dtypes differ); NaN counts as equal to NaN."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return max(a.numel(), b.numel())
    if a.is_floating_point():
        return int((~((a == b) | (a.isnan() & b.isnan()))).sum())
    return int((a != b).sum())


def _without_attention() -> bool:
    """Whether vLLM runs this call without attention metadata (a dummy run)."""
    from vllm.forward_context import get_forward_context, is_forward_context_available

    return is_forward_context_available() and get_forward_context().attn_metadata is None


def differential_backend(gm: Any, example_inputs: list[Any]) -> Any:
    """Our backend (inner "eager"), its compiled graph checked against `gm` run eagerly."""
    import torch

    from vllm_xdsl.compile import vllm_xdsl_backend

    priority = os.environ.get("VLLM_XDSL_PRIORITY")
    options = {"inner": "eager", **({"priority": priority} if priority else {})}
    compiled = vllm_xdsl_backend(gm, example_inputs, options=options)

    def copies(args: tuple[Any, ...]) -> list[Any]:
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    def run(*args: Any) -> Any:
        reference = _tensors(gm(*copies(args)))
        out = compiled(*args)
        counts = [differing(a, b) for a, b in zip(_tensors(out), reference, strict=True)]
        call: dict[str, Any] = {"call": len(CALLS), "outputs": len(counts),
                                "values": sum(t.numel() for t in reference),
                                "differ": sum(counts), "no_attention": _without_attention()}
        if call["differ"]:
            again = _tensors(gm(*copies(args)))
            call["reference_differs_from_itself"] = sum(
                differing(a, b) for a, b in zip(reference, again, strict=True))
        CALLS.append(call)
        return out

    return run
