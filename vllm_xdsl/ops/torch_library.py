"""Kernel ops for torch with a low cost per call: `define_op`.

The provider kernels (Triton, CUDA, ROCm) reach torch as ops with a fake, so that export and
torch.compile see one node per call. `torch.library.custom_op` would wrap every call in
Python (an autograd kernel that looks for gradients and redispatches, plus output checks);
an op defined on a `torch.library.Library` with one CompositeExplicitAutograd kernel goes
straight from the dispatcher to the launcher. bench/op_call_overhead.py measures both side
by side. At decode a kernel runs for a few microseconds, so this cost is the call's cost.

These are inference kernels: no autograd formula. The ops are pure (outputs never alias
inputs) unless `mutates_args` names what they write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

_LIBRARIES: dict[str, torch.library.Library] = {}


def library(namespace: str) -> torch.library.Library:
    """The one FRAGMENT library of `namespace` (definitions may come from several modules)."""
    if namespace not in _LIBRARIES:
        _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
    return _LIBRARIES[namespace]


def define_op(
    namespace: str,
    name: str,
    kernel: Callable[..., Any],
    fake: Callable[..., Any],
    *,
    schema_from: Callable[..., Any] | None = None,
    mutates_args: Sequence[str] = (),
) -> torch._ops.OpOverload:
    """Define `namespace::name` running `kernel` (every device) with `fake` for tracing.

    The schema is inferred from `schema_from` (default: the kernel), whose annotations must
    be real types; `mutates_args` marks the arguments the kernel writes."""
    lib = library(namespace)
    schema = torch.library.infer_schema(schema_from or kernel, mutates_args=tuple(mutates_args))
    lib.define(name + schema)
    lib.impl(name, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{namespace}::{name}", fake, lib=lib)
    return getattr(getattr(torch.ops, namespace), name).default
