"""Eager dispatch (outside torch.compile): the same `select` as lower-dispatch, on the
metadata of real tensors, with the decision cached per (policy, argument metadata).

The cache key must be cheap: a Python-level dispatch may add < 1 us to a ~20 us op
(DESIGN.md, measured facts). So the key holds dtype and shape of each tensor and the
device of the first, plus `policy.STATE.token`, which changes whenever a priority source
changes; the environment variable is checked by identity of its raw bytes value.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from vllm_xdsl.ops import policy
from vllm_xdsl.ops.dispatch import Decision, meta_args, select

if TYPE_CHECKING:
    from vllm_xdsl.ops.op import SemanticOp

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


def explain(op: SemanticOp, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Decision:
    """The decision eager dispatch makes for these arguments (nothing is run)."""
    _sync_env()
    return select(op, meta_args(op, args, kwargs), None, target_of(_first_device(args, kwargs)))


def _cloning(op: SemanticOp, fn: Callable[..., Any]) -> Callable[..., Any]:
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


def decide(
    op: SemanticOp, donated: bool, args: tuple[Any, ...], kwargs: dict[str, Any], key: Any
) -> Callable[..., Any]:
    """Select, wrap for in-place safety, and cache under `key` (None: do not cache)."""
    impl = explain(op, args, kwargs).impl
    fn = impl.fn
    if impl.inplace and not donated:
        fn = _cloning(op, fn)
    if key is not None:
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
    try:
        key = (_STATE.token, {key})
        fn = _cache.get(key)
    except (AttributeError, TypeError):  # a non-tensor where a tensor goes, or unhashable
        key = fn = None
    if fn is None:
        fn = _decide(_op, {donated}, ({args},), {{}}, key)
    return fn({args})
"""


def _key_item(name: str, annotation: Any, first_tensor: bool) -> str:
    if annotation is torch.Tensor:
        return f"{name}.device, {name}.dtype, {name}.shape" if first_tensor else \
            f"{name}.dtype, {name}.shape"
    if annotation == (torch.Tensor | None):
        return f"None if {name} is None else {name}.dtype, None if {name} is None else {name}.shape"
    if annotation is float:
        # A runtime scalar may arrive as a 0-d tensor: key it by metadata, not identity.
        return f"(({name}.dtype, {name}.shape) if isinstance({name}, _Tensor) else {name})"
    return name  # int, bool, str, dtype: the value itself


def make_call(op: SemanticOp, donated: bool) -> Callable[..., Any]:
    """Generate `__call__` (or `maybe_inplace`) for `op`, with the native's signature."""
    import inspect

    params, keys, defaults = [], [], {}
    seen_tensor = False
    for p in op.signature.parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{op.name}: native parameters must be positional-or-keyword")
        if p.default is inspect.Parameter.empty:
            params.append(p.name)
        else:
            defaults[f"_default_{p.name}"] = p.default
            params.append(f"{p.name}=_default_{p.name}")
        first = p.annotation is torch.Tensor and not seen_tensor
        seen_tensor = seen_tensor or first
        keys.append(_key_item(p.name, p.annotation, first))
    names = list(op.signature.parameters)
    fname = "maybe_inplace" if donated else "__call__"
    src = _TEMPLATE.format(name=fname, params=", ".join(params), args=", ".join(names),
                           key=", ".join(keys), donated=donated)
    env = {
        "_is_compiling": torch.compiler.is_compiling,
        "_torch_op": op.torch_op,
        "_env_get": _environ_data.get if _environ_data is not None else os.environ.get,
        "_env_key": _env_key if _environ_data is not None else policy.ENV_VAR,
        "_last_env_raw": _last_env_raw,
        "_sync_env": _sync_env,
        "_STATE": _STATE,
        "_Tensor": _Tensor,
        "_cache": op._inplace_cache if donated else op._cache,
        "_decide": decide,
        "_op": op,
        **defaults,
    }
    exec(compile(src, f"<vllm_xdsl.ops.{op.name}.{fname}>", "exec"), env)
    fn = env[fname]
    fn.__doc__ = f"Dispatch vllm_xdsl::{op.name} (see SemanticOp)."
    return fn
