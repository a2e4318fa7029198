"""Shape buckets: what one tuned winner covers, and the inputs it is measured on.

A bucket is the token count rounded up to a power of two, plus everything else that
changes which kernel is fastest: the hidden size, the dtypes, the quant scheme and flags,
which optional tensors are present, and the target. Epsilon's *value* is not part of it
(it never changes the speed), only whether it is a float or a runtime tensor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from vllm_xdsl.ops.impl import TensorMeta

# Arguments whose leading dims are the tokens (flattened to one dim T when measuring).
TOKEN_ARGS = ("x", "residual", "up")
# Optional arguments an op gained after tables were written: absent from a key when absent.
_LATER_OPTIONAL = ("up",)
# Values used for synthetic measuring inputs (as the OPS.md grid: |x| ~ 3, scale 0.02).
_X_SCALE = 3.0
_STATIC_SCALE = 0.02
_SCALE_UB = 2.5
_EPS = 1e-6


def token_bucket(tokens: int) -> int:
    """The smallest power of two >= tokens (1 for 0 or 1)."""
    return 1 if tokens <= 1 else 1 << (tokens - 1).bit_length()


def bucket_range(max_tokens: int) -> list[int]:
    """Bucket bounds 1, 2, 4, ... up to the bucket of max_tokens."""
    return [1 << i for i in range(token_bucket(max(1, max_tokens)).bit_length())]


def token_count(meta: Mapping[str, Any]) -> int | None:
    """Tokens of the call (product of x's leading dims), None when a dim is unknown."""
    x = meta.get("x")
    if not isinstance(x, TensorMeta) or x.ndim == 0:
        return None
    dims = [d for d in x.shape[:-1] if d is not None]
    if len(dims) != len(x.shape) - 1:
        return None
    return math.prod(dims)


def _dtype(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def _describe(name: str, value: Any) -> str:
    if isinstance(value, TensorMeta):
        if name in TOKEN_ARGS:
            return f"{name}={_dtype(value.dtype)}[T,{value.shape[-1]}]"
        if name == "epsilon":
            return "epsilon=tensor"
        return f"{name}={_dtype(value.dtype)}{list(value.shape)}"
    if name == "epsilon":
        return "epsilon=float"
    if isinstance(value, torch.dtype):
        return f"{name}={_dtype(value)}"
    return f"{name}={value!r}"


@dataclass(frozen=True)
class Bucket:
    """One tuning cell: op, target, token bucket bound and the rest of the arguments."""

    op: str
    target: str
    tokens: int
    shape: str  # the non-token part, e.g. "x=bfloat16[T,4096] weight=bfloat16[4096] ..."

    @property
    def key(self) -> str:
        return f"{self.op}|{self.target}|T<={self.tokens}|{self.shape}"

    def with_tokens(self, tokens: int) -> Bucket:
        return Bucket(self.op, self.target, tokens, self.shape)

    def __str__(self) -> str:
        return f"{self.op} T<={self.tokens} {self.shape}"


def bucket_of(op: str, meta: Mapping[str, Any], target: str, tokens: int | None = None) -> Bucket:
    """The bucket of a call; `tokens` overrides the count (lowering: unknown count)."""
    tokens = token_count(meta) if tokens is None else tokens
    if tokens is None:
        raise ValueError(f"{op}: the token count is unknown (a bucket needs one)")
    shape = " ".join(
        _describe(k, v) for k, v in meta.items() if not (k in _LATER_OPTIONAL and v is None)
    )
    return Bucket(op, target, token_bucket(tokens), shape)


def device_of(target: str) -> str:
    return "cpu" if target == "cpu" else "cuda"


def synth_args(meta: Mapping[str, Any], tokens: int, device: str, seed: int = 0) -> dict[str, Any]:
    """Concrete arguments for a call of this metadata with `tokens` tokens (deterministic)."""
    g = torch.Generator().manual_seed(seed)
    args: dict[str, Any] = {}
    for name, v in meta.items():
        if not isinstance(v, TensorMeta):
            args[name] = _EPS if name == "epsilon" and v is None else v
            continue
        if name in TOKEN_ARGS:
            t = torch.randn((tokens, *_concrete(v.shape[-1:], name)), generator=g) * _X_SCALE
        elif name == "epsilon":
            t = torch.tensor(_EPS, dtype=torch.float64)
        elif name == "scale":
            t = torch.full(_concrete(v.shape, name), _STATIC_SCALE)
        elif name == "scale_ub":
            t = torch.full(_concrete(v.shape, name), _SCALE_UB)
        else:  # weight
            t = 1.0 + 0.1 * torch.randn(_concrete(v.shape, name), generator=g)
        args[name] = t.to(device=device, dtype=v.dtype)
    return args


def _concrete(shape: tuple[int | None, ...], name: str) -> tuple[int, ...]:
    dims = tuple(d for d in shape if d is not None)
    if len(dims) != len(shape):
        raise ValueError(f"argument {name} has an unknown dimension {shape}: cannot measure")
    return dims
