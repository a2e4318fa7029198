"""The Triton launchers as torch ops: `torch.ops.vllm_xdsl_triton.<op>`.

One op per semantic op, with the native's schema and the native as fake (it is shape,
dtype and stride exact and runs on fake tensors). The same op serves eager calls and
exported FX graphs (a plain op call). Defined with `define_op` (ops/torch_library.py): no
Python wrapper between the dispatcher and the launcher. `torch.library.triton_op` would let
Inductor look inside, but it runs the kernel on fake tensors under Triton's interpreter
(OPS.md), so a plain op with a fake is the portable choice.
"""

from __future__ import annotations

import torch

from vllm_xdsl import ops
from vllm_xdsl.backends.triton.functions import FUNCTIONS
from vllm_xdsl.ops.torch_library import define_op

NAMESPACE = "vllm_xdsl_triton"

TORCH_OPS: dict[str, torch._ops.OpOverload] = {
    name: define_op(NAMESPACE, name, fn, ops.ALL_OPS[name].native,
                    schema_from=ops.ALL_OPS[name].native)
    for name, fn in FUNCTIONS.items()
}


def torch_op(name: str) -> torch._ops.OpOverload:
    """The OpOverload to call from an FX graph (`torch.ops.vllm_xdsl_triton.<name>.default`)."""
    return TORCH_OPS[name]
