"""What `supports_args` sees for an IR op: its native arguments as tensor metadata.

The arguments come from the one IR <-> native binding (dialects/binding.py); operands become
TensorMeta. A runtime epsilon (operand `epsilon_value`, a 0-d f64 tensor or an f64 scalar)
reaches `supports_args` as TensorMeta(float64, (), device): what eager dispatch gives for the
0-d float64 tensor that Dynamo passes for a float module attribute. An implementation that
needs a Python float can reject it by type; its value is unknown at compile time.
"""

from __future__ import annotations

from typing import Any

import torch
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from vllm_xdsl.dialects.binding import native_args
from vllm_xdsl.dialects.types import static_shape, torch_dtype
from vllm_xdsl.dialects.vllm import SemanticSignature
from vllm_xdsl.ops import TensorMeta


def meta_of(value: SSAValue, device: str) -> TensorMeta:
    """TensorMeta of an operand; an f64 scalar (runtime epsilon) as a 0-d float64 tensor."""
    t = value.type
    if isinstance(t, TensorType):
        return TensorMeta(torch_dtype(t.element_type), static_shape(t), device)
    return TensorMeta(torch.float64, (), device)


def meta_args(op: Operation, device: str) -> dict[str, Any]:
    """What `supports_args` sees for `op` when lowering for a target with `device`."""
    assert isinstance(op, SemanticSignature)
    return native_args(op, lambda v: meta_of(v, device))
