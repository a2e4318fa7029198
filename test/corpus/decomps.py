"""Inductor decompositions that eager does not compute bit for bit, and a way to compile
without one, to tell its difference from the pipeline's.

The backend traces with Inductor's decomposition table (vllm_xdsl.frontend.capture), as
torch's own `aot_eager_decomp_partition` backend does; with inner="eager" the decomposed
ops run as written. `aten._softmax` becomes `exp(x - amax) / sum`, which in f32 on the CPU
differs from ATen's softmax kernel by an ulp (the attention softmax of Gemma2/3's eager
attention, the router softmax of Qwen2Moe and Mixtral). No pass touches a softmax: a row
that is bit-exact once its softmax is not decomposed differs from eager by torch's
decomposition, not by anything the pipeline raised.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch._inductor.decomposition as inductor_decomposition

# Name (as the table's note says it) -> the op whose decomposition it is.
INEXACT: dict[str, torch._ops.OpOverload] = {"softmax": torch.ops.aten._softmax.default}


@contextmanager
def without_decomposition(op: torch._ops.OpOverload) -> Iterator[None]:
    """While active, the backend traces with Inductor's table less `op` (the graph keeps
    `op` as it is, and inner="eager" runs ATen's kernel)."""
    original = inductor_decomposition.select_decomp_table

    def table() -> dict[Any, Callable[..., Any]]:
        return {k: v for k, v in original().items() if k != op}

    inductor_decomposition.select_decomp_table = table
    try:
        yield
    finally:
        inductor_decomposition.select_decomp_table = original
