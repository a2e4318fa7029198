"""The runtime selection as torch ops: `torch.ops.vllm_xdsl_auto.<op>`.

Each takes the native's arguments plus the tuned table of the call site,
`int[] tokens, str[] winners` (bucket bounds ascending; a count above the last bound uses
the last winner), reads the token count of `x` at run time and calls that bucket's winner
(the registered impl's function; an in-place impl on copies). Its fake is the native, so
one exported graph holds every bucket's winner and serves any token count.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

from vllm_xdsl import ops

NAMESPACE = "vllm_xdsl_auto"
_LIB = torch.library.Library(NAMESPACE, "DEF")


def pick(tokens: Sequence[int], winners: Sequence[str], count: int) -> str:
    """The winner of the bucket holding `count` tokens."""
    return winners[min(bisect.bisect_left(tokens, count), len(winners) - 1)]


@functools.cache
def impl_fn(op: str, provider: str) -> Callable[..., Any]:
    """The function that runs `provider`'s impl of `op` on the caller's inputs safely."""
    semantic = ops.ALL_OPS[op]
    impl = semantic.impls().get(provider)
    if impl is None:
        raise RuntimeError(f"vllm_xdsl_auto::{op}: provider {provider!r} has no implementation "
                           f"of {op} in this process (is its package installed?)")
    if impl.inplace:
        from vllm_xdsl.ops.eager import _cloning

        return _cloning(semantic, impl.fn)
    return impl.fn


def _define(name: str) -> None:
    semantic = ops.ALL_OPS[name]
    schema = str(semantic.torch_op._opoverload._schema).split("::", 1)[1]
    schema = re.sub(r"\) ->", ", int[] tokens, str[] winners) ->", schema, count=1)
    _LIB.define(schema)
    native = semantic.native

    def kernel(*args: Any) -> Any:
        *args_, tokens, winners = args
        x = args_[0]
        out = impl_fn(name, pick(tokens, winners, math.prod(x.shape[:-1])))(*args_)
        return out

    def fake(*args: Any) -> Any:
        return native(*args[:-2])

    _LIB.impl(name, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_LIB)


for _name in ops.ALL_OPS:
    _define(_name)


def torch_op(name: str) -> torch._ops.OpOverload:
    return getattr(getattr(torch.ops, NAMESPACE), name).default
