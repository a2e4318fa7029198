"""Provider `vllm_c`: the semantic ops run by vLLM's own `torch.ops._C` kernels.

Registered through the `vllm_xdsl.providers` entry point (`register`) when `vllm` is
installed; registration is cheap (no vLLM import): the kernels load on the first
availability check. Eager and `lower-dispatch` both use it; `lower-dispatch` has no
`vllm_c` dialect, so a compiled graph calls it at run time through `auto.<op>` (eager
kernels, no IR lowering of their own). See kernels.py for what each kernel computes.
"""

from __future__ import annotations

import importlib.util

PROVIDER = "vllm_c"


def register() -> None:
    """The entry point: register every wrapper, or nothing when vLLM is not installed."""
    if importlib.util.find_spec("vllm") is None:
        return
    from vllm_xdsl.backends.vllm_c.kernels import register_all

    register_all()
