"""The Triton launchers as torch custom ops: `torch.ops.vllm_xdsl_triton.<op>`.

One op per semantic op, with the native's schema and the native as fake (it is shape,
dtype and stride exact and runs on fake tensors). The same op serves eager calls and
exported FX graphs (a plain op call). `torch.library.triton_op` would let Inductor look
inside, but it runs the kernel on fake tensors under Triton's interpreter (OPS.md), so the
custom op is the portable choice.
"""

from __future__ import annotations

import torch

from vllm_xdsl import ops
from vllm_xdsl.backends.triton.functions import FUNCTIONS

NAMESPACE = "vllm_xdsl_triton"


def _define(name: str) -> torch.library.CustomOpDef:
    native = ops.ALL_OPS[name].native
    op = torch.library.custom_op(
        f"{NAMESPACE}::{name}",
        FUNCTIONS[name],
        mutates_args=(),
        schema=torch.library.infer_schema(native, mutates_args=()),
    )
    op.register_fake(native)
    return op


TORCH_OPS: dict[str, torch.library.CustomOpDef] = {name: _define(name) for name in FUNCTIONS}


def torch_op(name: str) -> torch._ops.OpOverload:
    """The OpOverload to call from an FX graph (`torch.ops.vllm_xdsl_triton.<name>.default`)."""
    return getattr(getattr(torch.ops, NAMESPACE), name).default
