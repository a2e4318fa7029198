"""`SemanticOp`: one declared op: native contract, torch custom op, implementation registry.

Calling an op dispatches: while Dynamo traces, to the torch custom op (one graph node);
otherwise to the implementation chosen by the priority policy, with the decision cached
per argument metadata (a custom op call costs ~12 us, a cached Python dispatch < 1 us).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch.compiler import is_compiling

from vllm_xdsl.core.catalog import OpSpec
from vllm_xdsl.ops import eager, registry
from vllm_xdsl.ops.impl import Impl, RegistrationError, check_impl_signature


class SemanticOp:
    """A semantic op: `op(...)` dispatches, `.native` is the contract, `.torch_op` the custom op."""

    def __init__(
        self,
        name: str,
        native: Callable[..., Any],
        outputs: tuple[str, ...],
        *,
        fused: bool = False,
        inplace_outputs: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.native = native
        self.signature = inspect.signature(native)
        self.outputs = outputs
        self.fused = fused
        self.spec: OpSpec | None = None  # the catalog declaration (from_spec), if any
        # Which output an in-place kernel may write into which input (same shape and dtype).
        self.inplace_outputs: dict[str, str] = dict(inplace_outputs or {})
        for out, inp in self.inplace_outputs.items():
            if out not in outputs or inp not in self.signature.parameters:
                raise ValueError(f"{name}: bad inplace_outputs entry {out!r} -> {inp!r}")
        self.torch_op = torch.library.custom_op(f"vllm_xdsl::{name}", native, mutates_args=())
        # The native is shape/dtype/stride-exact and runs on fake tensors: it is the fake too.
        self.torch_op.register_fake(native)
        self.native_impl = Impl(name, "native", native, True, None, False)
        self._impls: dict[str, Impl] = {}
        # Eager decision caches, cleared on registration: (policy, argument metadata) ->
        # callable, and per device for decisions that read no argument (Decision.uses_args
        # False), whose key costs a fraction of the full one.
        self._cache: dict[Any, Callable[..., Any]] = {}
        self._inplace_cache: dict[Any, Callable[..., Any]] = {}
        self._device_cache = eager.DeviceCache()
        self._inplace_device_cache = eager.DeviceCache()
        self.__class__ = type(
            f"SemanticOp_{name}",
            (SemanticOp,),
            {"__call__": eager.make_call(self, False),
             "maybe_inplace": eager.make_call(self, True)},
        )
        registry.declare(self)

    @classmethod
    def from_spec(cls, spec: OpSpec) -> SemanticOp:
        """The op a catalog spec declares (its native resolved from the reference)."""
        op = cls(spec.name, resolve_native(spec), spec.result_names, fused=spec.fused,
                 inplace_outputs=dict(spec.inplace))
        op.spec = spec
        return op

    def __repr__(self) -> str:
        return f"<SemanticOp vllm_xdsl::{self.name}{self.signature}>"

    # --- registry -------------------------------------------------------------------

    def register_impl(
        self,
        provider: str,
        *,
        supported: bool | Callable[..., bool | str] = True,
        supports_args: Callable[..., bool | str] | None = None,
        inplace: bool = False,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering `fn` as `provider`'s implementation of this op."""

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            if provider == "native":
                raise RegistrationError(
                    f"{self.name}: provider name 'native' is reserved for the contract"
                )
            if not isinstance(provider, str) or not provider.isidentifier() or provider == "auto":
                raise RegistrationError(f"{self.name}: invalid provider name {provider!r}")
            if provider in self._impls:
                raise RegistrationError(
                    f"{self.name}: provider {provider!r} already registered an implementation"
                )
            if inplace and not self.inplace_outputs:
                raise RegistrationError(
                    f"{self.name}: provider {provider!r} registered inplace=True, "
                    "but this op has no in-place outputs"
                )
            check_impl_signature(self.name, provider, self.signature, fn)
            self._impls[provider] = Impl(
                self.name, provider, fn, supported, supports_args, inplace
            )
            registry.changed()
            return fn

        return decorate

    def unregister_impl(self, provider: str) -> None:
        """Remove a provider's impl (for tests and plugin reloads); KeyError if absent."""
        del self._impls[provider]
        registry.changed()

    def impls(self) -> dict[str, Impl]:
        """Registered implementations by provider (out-of-tree providers loaded), native last."""
        registry.ensure_loaded()
        return {**self._impls, "native": self.native_impl}

    def clear_cache(self) -> None:
        # clear(), never new objects: the generated calls hold these (or their methods).
        self._cache.clear()
        self._inplace_cache.clear()
        self._device_cache.clear()
        self._inplace_device_cache.clear()
        for impl in self._impls.values():  # what each impl found it can run on
            impl.forget_availability()

    # --- calling ----------------------------------------------------------------------

    # Each instance gets a generated subclass whose `__call__` and `maybe_inplace` have the
    # native's exact signature and a spelled-out cache key (see eager.make_call): a generic
    # *args version costs ~3x more. These generic versions document the behaviour.

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if is_compiling():
            return self.torch_op(*args, **kwargs)  # one node in the traced graph
        return eager.decide(self, False, args, kwargs, None)(*args, **kwargs)

    def maybe_inplace(self, *args: Any, **kwargs: Any) -> Any:
        """Like calling the op, but the caller donates the inputs named in `inplace_outputs`:
        an in-place implementation may overwrite them (use only the returned values)."""
        if is_compiling():
            return self.torch_op(*args, **kwargs)
        return eager.decide(self, True, args, kwargs, None)(*args, **kwargs)

    def explain(self, *args: Any, **kwargs: Any) -> Any:
        """The eager dispatch Decision for these arguments (runs nothing)."""
        return eager.explain(self, args, kwargs)


def resolve_native(spec: OpSpec) -> Callable[..., Any]:
    """The native function a spec's "module:function" reference names."""
    module, _, function = spec.native.partition(":")
    native = getattr(importlib.import_module(module), function)
    if not callable(native):
        raise TypeError(f"{spec.name}: native {spec.native} is not a function")
    return native


def native_binder(spec: OpSpec) -> tuple[inspect.Signature, Callable[..., list[Any]]]:
    """The native's signature and a binder: (args, kwargs) -> every parameter's value in the
    spec's order, defaults filled in (Python's TypeError for a call that does not fit). What
    a provider's launcher with the native's signature reads its arguments with."""
    signature = inspect.signature(resolve_native(spec))
    defaults = [p.default for p in signature.parameters.values()]
    required = sum(d is inspect.Parameter.empty for d in defaults)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        if not kwargs and required <= len(args) <= len(defaults):
            return [*args, *defaults[len(args):]]  # a positional call binds inline
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return list(bound.arguments.values())

    return signature, bind
