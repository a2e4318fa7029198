"""Registered implementations, the tensor-metadata view their argument checks see, and
`DeclaredOp`: what the registry and dispatch know of a declared op.

`DeclaredOp` is a protocol so that the registry, the policy and dispatch depend on this
module only, never on `op.py` (SemanticOp), which imports them: the modules of `ops` form
a DAG (test/test_import_cycles.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch


class RegistrationError(ValueError):
    """An implementation that cannot be registered (bad name, duplicate, wrong signature)."""


@dataclass(frozen=True)
class TensorMeta:
    """What an argument check may know about a tensor: the same in eager mode (real
    tensors) and in lower-dispatch (IR types, where unknown dims are None)."""

    dtype: torch.dtype
    shape: tuple[int | None, ...]
    device: str

    @staticmethod
    def from_tensor(t: torch.Tensor) -> TensorMeta:
        return TensorMeta(t.dtype, tuple(t.shape), t.device.type)

    @property
    def ndim(self) -> int:
        return len(self.shape)


def _describe(p: inspect.Parameter) -> str:
    default = "" if p.default is inspect.Parameter.empty else f"={p.default!r}"
    return f"{p.name}{default} ({p.kind.description})"


def check_impl_signature(
    op: str, provider: str, expected: inspect.Signature, fn: Callable[..., Any]
) -> None:
    """An impl must take exactly the native's parameters (names, order, defaults, kinds)."""
    try:
        got = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise RegistrationError(f"{op}: provider {provider!r}: no inspectable signature ({e})") from None
    want = list(expected.parameters.values())
    have = list(got.parameters.values())
    for i in range(max(len(want), len(have))):
        w = want[i] if i < len(want) else None
        h = have[i] if i < len(have) else None
        if w is None or h is None or (w.name, w.kind, w.default) != (h.name, h.kind, h.default):
            wd = _describe(w) if w else "nothing"
            hd = _describe(h) if h else "nothing"
            raise RegistrationError(
                f"{op}: provider {provider!r}: signature {got} differs from the native "
                f"{expected}: parameter {i} is {hd}, expected {wd}"
            )


def _reason(result: Any, what: str) -> str | None:
    """None if `result` accepts; otherwise the reason string."""
    if isinstance(result, str):
        return result or what
    return None if result else what


def _takes_target(fn: Callable[..., Any]) -> bool:
    try:
        return "target" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


class Impl:
    """One provider's implementation of one op, with its availability and argument checks."""

    __slots__ = ("op", "provider", "fn", "supported", "supports_args", "inplace", "_available")

    def __init__(
        self,
        op: str,
        provider: str,
        fn: Callable[..., Any],
        supported: bool | Callable[..., bool | str],
        supports_args: Callable[..., bool | str] | None,
        inplace: bool,
    ) -> None:
        self.op = op
        self.provider = provider
        self.fn = fn
        self.supported = supported
        self.supports_args = supports_args
        self.inplace = inplace
        self._available: dict[str | None, str | None] = {}

    def __repr__(self) -> str:
        return f"<Impl {self.op}:{self.provider}{' (inplace)' if self.inplace else ''}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def unavailable(self, target: str | None = None) -> str | None:
        """Why this impl cannot run (None if it can); evaluated once per target.

        `supported` is a bool, a zero-argument callable (can it run on this machine now),
        or a callable with a `target` parameter, called with the dispatch target: can it
        serve that target ("cuda", "rocm", "cpu") with the toolchain here. The target form
        is what lets lower-dispatch compile for a GPU this machine does not have; in eager
        dispatch the target comes from the tensors' device, so the GPU exists.
        """
        cache = self._available
        if target not in cache:
            supported = self.supported
            s: bool | str
            if callable(supported):
                try:
                    s = supported(target=target) if _takes_target(supported) else supported()
                except Exception as e:  # a broken probe makes the impl unavailable, visibly
                    s = f"availability check raised {type(e).__name__}: {e}"
            else:
                s = supported
            cache[target] = _reason(s, "not supported here")
        return cache[target]

    def forget_availability(self) -> None:
        """Ask `supported` again on the next `unavailable` (registry.changed calls it)."""
        self._available.clear()

    def rejects(self, meta_args: dict[str, Any]) -> str | None:
        """Why this impl rejects these arguments (tensors as TensorMeta), or None."""
        if self.supports_args is None:
            return None
        try:
            result = self.supports_args(**meta_args)
        except Exception as e:
            return f"supports_args raised {type(e).__name__}: {e}"
        return _reason(result, "rejected the arguments")


class DeclaredOp(Protocol):
    """A declared semantic op as the registry, the policy and dispatch see it (SemanticOp)."""

    @property
    def name(self) -> str: ...

    @property
    def signature(self) -> inspect.Signature: ...

    @property
    def inplace_outputs(self) -> dict[str, str]: ...

    @property
    def native_impl(self) -> Impl: ...

    @property
    def _impls(self) -> dict[str, Impl]: ...

    def impls(self) -> dict[str, Impl]: ...

    def clear_cache(self) -> None: ...
