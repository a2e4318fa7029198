"""Eager dispatch (outside torch.compile): the same `select` as lower-dispatch, on the
metadata of real tensors, with the decision cached per (policy, argument metadata).

The cache key must be cheap: a Python-level dispatch may add < 1 us to a ~20 us op
(bench/dispatch_overhead.py measures it). So the key holds dtype and shape of each tensor and the
device of the first, plus `policy.STATE.token`, which changes whenever a priority source
changes; the environment variable is checked by identity of its raw bytes value.

Most of that key's cost is reading tensor attributes (~50-100 ns each). A decision that
read no argument (`Decision.uses_args` False: e.g. native on the CPU, or an impl without
`supports_args`) holds for any arguments on that device, so it is cached by the device of
the first tensor under the current token alone (DeviceCache), and the full key is not built.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

import torch

from vllm_xdsl.ops import policy
from vllm_xdsl.ops.dispatch import Decision, meta_args, select
from vllm_xdsl.ops.impl import DeclaredOp

_Tensor = torch.Tensor
_STATE = policy.STATE
_MAX_CACHE = 4096

# os.environ.get costs ~0.6 us (it encodes and decodes); the raw dict lookup ~50 ns.
_environ_data: dict | None = getattr(os.environ, "_data", None)
_env_key: Any = os.environ.encodekey(policy.ENV_VAR) if _environ_data is not None else None
_last_env_raw: list[Any] = [object()]


def _sync_env() -> None:
    """Re-read the environment source if its raw value changed (identity check: cheap)."""
    if _environ_data is None:
        policy.sync_env()
        return
    raw = _environ_data.get(_env_key)
    if raw is not _last_env_raw[0]:
        policy.sync_env()
        _last_env_raw[0] = raw


def target_of(device: torch.device | None) -> str:
    """Dispatch target of a tensor device: cuda, rocm (a HIP build's 'cuda'), else cpu."""
    if device is not None and device.type == "cuda":
        return "rocm" if torch.version.hip else "cuda"
    return "cpu"


def _first_device(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    for v in (*args, *kwargs.values()):
        if isinstance(v, _Tensor):
            return v.device
    return None


def explain(op: DeclaredOp, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Decision:
    """The decision eager dispatch makes for these arguments (nothing is run)."""
    _sync_env()
    return select(op, meta_args(op, args, kwargs), None, target_of(_first_device(args, kwargs)))


def _cloning(op: DeclaredOp, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an in-place impl so that it overwrites clones, never the caller's tensors."""
    names = set(op.inplace_outputs.values())
    where = [(i, n) for i, n in enumerate(op.signature.parameters) if n in names]

    def call_on_clones(*args: Any, **kwargs: Any) -> Any:
        args_l = list(args)
        for i, n in where:
            if i < len(args_l):
                if isinstance(args_l[i], _Tensor):
                    args_l[i] = args_l[i].clone()
            elif isinstance(kwargs.get(n), _Tensor):
                kwargs[n] = kwargs[n].clone()
        return fn(*args_l, **kwargs)

    return call_on_clones


class DeviceCache:
    """Decisions that read no argument (Decision.uses_args False) under one policy token:
    device -> callable. A new token starts it afresh, so a stale one costs a single `is`."""

    __slots__ = ("by_device", "token")

    def __init__(self) -> None:
        self.token: object = None
        self.by_device: dict[torch.device, Callable[..., Any]] = {}

    def store(self, token: object, device: torch.device, fn: Callable[..., Any]) -> None:
        if token is not self.token:
            self.by_device = {}  # before the token: a concurrent reader never sees a mix
            self.token = token
        self.by_device[device] = fn

    def clear(self) -> None:
        self.token = None
        self.by_device = {}


class EagerOp(DeclaredOp, Protocol):
    """What eager dispatch needs of an op (SemanticOp): its torch op and decision caches."""

    @property
    def torch_op(self) -> Callable[..., Any]: ...

    @property
    def _cache(self) -> dict[Any, Callable[..., Any]]: ...

    @property
    def _inplace_cache(self) -> dict[Any, Callable[..., Any]]: ...

    @property
    def _device_cache(self) -> DeviceCache: ...

    @property
    def _inplace_device_cache(self) -> DeviceCache: ...


def decide(
    op: EagerOp,
    donated: bool,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    key: Any,
    token: object = None,
    device: torch.device | None = None,
) -> Callable[..., Any]:
    """Select, wrap for in-place safety, and cache: a decision that read no argument under
    (`token`, `device`) if a device is given, any other under the full `key` (None: do not
    cache)."""
    decision = explain(op, args, kwargs)
    impl = decision.impl
    fn = impl.fn
    if impl.inplace and not donated:
        fn = _cloning(op, fn)
    if key is None:
        return fn
    if device is not None and not decision.uses_args:
        (op._inplace_device_cache if donated else op._device_cache).store(token, device, fn)
    else:
        cache = op._inplace_cache if donated else op._cache
        if len(cache) >= _MAX_CACHE:
            cache.clear()
        cache[key] = fn
    return fn


# --- generated call functions ------------------------------------------------------------
# A generic `__call__(self, *args, **kwargs)` that builds its key in a loop costs ~2.5 us;
# a function generated per op, with the op's own signature and the key spelled out per
# parameter, costs well under 1 us (bench/dispatch_overhead.py).

_TEMPLATE = """\
def {name}(self, {params}):
    if _is_compiling():
        return _torch_op({args})  # one node in the traced graph
    raw = _env_get(_env_key)
    if raw is not _last_env_raw[0]:
        _sync_env()
    token = _STATE.token
    try:
{lookup}
    except (AttributeError, TypeError):  # a non-tensor where a tensor goes, or unhashable
        key = fn = None
    if fn is None:
        fn = _decide(_op, {donated}, ({args},), {{}}, key, token, {device})
    return fn({args})
"""
# A decision that read no argument is looked up first, by device alone, if this op has any
# under the current policy token: other calls pay one `is` for it.
_DEVICE_LOOKUP = """\
        fn = _by_device.by_device.get({first}.device) if _by_device.token is token else None
        if fn is None:
            key = (token, {key})
            fn = _cache_get(key)"""
# An op without a plain tensor parameter has no device to key on: full key only.
_FULL_LOOKUP = """\
        key = (token, {key})
        fn = _cache_get(key)"""


def _scalar_key(v: Any) -> Any:
    return (v.dtype, v.shape) if isinstance(v, _Tensor) else v


def _key_item(name: str, annotation: Any, first_tensor: bool) -> str:
    if annotation is torch.Tensor:
        return f"{name}.device, {name}.dtype, {name}.shape" if first_tensor else \
            f"{name}.dtype, {name}.shape"
    if annotation == (torch.Tensor | None):
        return f"None if {name} is None else {name}.dtype, None if {name} is None else {name}.shape"
    if annotation is float:
        # A runtime scalar may arrive as a 0-d tensor: key it by metadata, not identity.
        # The class test first: isinstance(v, torch.Tensor) costs ~130 ns (its metaclass).
        return f"({name} if {name}.__class__ is _float else _scalar_key({name}))"
    return name  # int, bool, str, dtype: the value itself


def make_call(op: EagerOp, donated: bool) -> Callable[..., Any]:
    """Generate `__call__` (or `maybe_inplace`) for `op`, with the native's signature."""
    import inspect

    params, keys, defaults = [], [], {}
    first: str | None = None  # the first plain tensor parameter: its device is keyed
    for p in op.signature.parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{op.name}: native parameters must be positional-or-keyword")
        if p.default is inspect.Parameter.empty:
            params.append(p.name)
        else:
            defaults[f"_default_{p.name}"] = p.default
            params.append(f"{p.name}=_default_{p.name}")
        is_first = p.annotation is torch.Tensor and first is None
        if is_first:
            first = p.name
        keys.append(_key_item(p.name, p.annotation, is_first))
    names = list(op.signature.parameters)
    fname = "maybe_inplace" if donated else "__call__"
    lookup = (_FULL_LOOKUP if first is None else _DEVICE_LOOKUP).format(
        first=first, key=", ".join(keys))
    device = "None" if first is None else f"None if key is None else {first}.device"
    src = _TEMPLATE.format(name=fname, params=", ".join(params), args=", ".join(names),
                           lookup=lookup, donated=donated, device=device)
    env = {
        "_is_compiling": torch.compiler.is_compiling,
        "_torch_op": op.torch_op,
        "_env_get": _environ_data.get if _environ_data is not None else os.environ.get,
        "_env_key": _env_key if _environ_data is not None else policy.ENV_VAR,
        "_last_env_raw": _last_env_raw,
        "_sync_env": _sync_env,
        "_STATE": _STATE,
        "_float": float,
        "_scalar_key": _scalar_key,
        "_cache_get": (op._inplace_cache if donated else op._cache).get,
        "_by_device": op._inplace_device_cache if donated else op._device_cache,
        "_decide": decide,
        "_op": op,
        **defaults,
    }
    exec(compile(src, f"<vllm_xdsl.ops.{op.name}.{fname}>", "exec"), env)
    fn = env[fname]
    fn.__doc__ = f"Dispatch vllm_xdsl::{op.name} (see SemanticOp)."
    return fn
