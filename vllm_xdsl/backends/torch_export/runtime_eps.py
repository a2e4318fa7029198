"""Provider kernels called with a runtime epsilon tensor.

A provider torch op takes epsilon as a float, and a custom op's float argument cannot be
an unbacked value read from a tensor while tracing. So a provider op whose epsilon is a
runtime 0-d tensor is exported as `torch.ops.vllm_xdsl_export.<provider>__<op>`: the same
schema with `Tensor epsilon`, whose kernel reads the value at run time (`.item()`, one
host read; no value is baked in) and calls the provider op, and whose fake is the native
(which computes `var + epsilon` identically with the tensor).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import torch

NAMESPACE = "vllm_xdsl_export"
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")


@functools.cache
def tensor_epsilon_op(overload: torch._ops.OpOverload, semantic: str) -> torch._ops.OpOverload:
    """The wrapper op of `overload` that takes epsilon as a 0-d tensor."""
    from vllm_xdsl import ops

    name = f"{overload.namespace}__{semantic}"
    schema = str(overload._schema).split("(", 1)[1]
    schema, count = re.subn(r"\bfloat epsilon\b", "Tensor epsilon", schema)
    if count != 1:
        raise ValueError(f"{overload}: no 'float epsilon' argument in {overload._schema}")
    _LIB.define(f"{name}({schema}")
    position = [a.name for a in overload._schema.arguments].index("epsilon")
    native = ops.ALL_OPS[semantic].native

    def kernel(*args: Any) -> Any:
        values = list(args)
        values[position] = float(values[position].item())
        return overload(*values)

    _LIB.impl(name, kernel, "CompositeExplicitAutograd")
    # An op may take arguments after the native's (auto.*: its bucket table): not the fake's.
    count = len(ops.ALL_OPS[semantic].signature.parameters)
    torch.library.register_fake(f"{NAMESPACE}::{name}", lambda *args: native(*args[:count]),
                                lib=_LIB)
    return getattr(getattr(torch.ops, NAMESPACE), name).default
