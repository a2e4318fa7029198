"""Where implementations come from: built-in backends and out-of-tree providers.

Providers are loaded lazily, on the first registry query that needs them (not at import,
so `import vllm_xdsl.ops` stays cheap and a CPU-only eager call never imports Triton):

- built-in backends: the module `vllm_xdsl.backends.<p>.provider` of each built-in
  provider `p`, if it exists, registers its impls on import;
- out-of-tree: every entry point of the group `vllm_xdsl.providers`; the entry point is a
  zero-argument callable (called) or a module (imported) that registers impls.

Loading is re-entrant: a provider that imports `vllm_xdsl.ops` or queries the registry
while it loads sees the registry as it is so far, without deadlock or recursion. A provider
that fails to load is skipped with one warning and recorded in `load_errors()`.
"""

from __future__ import annotations

import importlib
import threading
import types
import warnings
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_xdsl.ops.impl import Impl
    from vllm_xdsl.ops.op import SemanticOp

ENTRY_POINT_GROUP = "vllm_xdsl.providers"
BUILTIN_PROVIDERS: tuple[str, ...] = ("cuda", "rocm", "triton")
_BUILTIN_MODULE = "vllm_xdsl.backends.{}.provider"
# Built-in plugins of the policy, loaded with the providers: the tuner installs the `auto`
# priority (dispatch.set_auto_policy), so that dispatch never imports it.
BUILTIN_PLUGINS: tuple[str, ...] = ("vllm_xdsl.tune",)

# Every declared op by name, in declaration order (SemanticOp declares itself here).
_ops: dict[str, SemanticOp] = {}
_lock = threading.RLock()
_loaded = False
_loading = False
_load_errors: list[str] = []


def ensure_loaded() -> None:
    """Load built-in and out-of-tree providers once (re-entrant; thread-safe)."""
    global _loaded, _loading
    if _loaded:
        return
    with _lock:
        if _loaded or _loading:  # _loading: a provider queried us while it loads
            return
        _loading = True
        try:
            for name in BUILTIN_PROVIDERS:
                _load_builtin(name)
            for module in BUILTIN_PLUGINS:
                _load_module(f"plugin {module!r}", module)
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                _load_entry_point(ep)
        finally:
            _loaded = True
            _loading = False
        changed()


def _fail(what: str, e: BaseException) -> None:
    msg = f"vllm_xdsl: provider {what} failed to load, skipped: {type(e).__name__}: {e}"
    _load_errors.append(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _load_builtin(name: str) -> None:
    module = _BUILTIN_MODULE.format(name)
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name not in (module, module.rsplit(".", 1)[0]):
            _fail(f"{name!r} ({module})", e)  # the module exists but misses a dependency
    except Exception as e:
        _fail(f"{name!r} ({module})", e)


def _load_module(what: str, module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception as e:
        _fail(what, e)


def _load_entry_point(ep) -> None:
    try:
        obj = ep.load()
        if not isinstance(obj, types.ModuleType):
            if not callable(obj):
                raise TypeError(f"entry point {ep.value!r} is neither a module nor callable")
            obj()
    except Exception as e:
        _fail(f"entry point {ep.name!r} ({ep.value})", e)


def load_errors() -> list[str]:
    """Messages of providers that failed to load (each also warned once)."""
    ensure_loaded()
    return list(_load_errors)


def declare(op: SemanticOp) -> None:
    """Enter a newly declared op in the table (ValueError if its name is taken)."""
    if op.name in _ops:
        raise ValueError(f"op {op.name!r} is declared twice")
    _ops[op.name] = op


def all_ops() -> dict[str, SemanticOp]:
    """Every declared op by name (vllm_xdsl.ops.ALL_OPS once the package has loaded)."""
    return _ops


def changed() -> None:
    """Registrations changed: drop every cached eager decision."""
    for op in _ops.values():
        op.clear_cache()


def registered_providers() -> set[str]:
    """Every provider that registered at least one impl (after loading), plus 'native'."""
    ensure_loaded()
    names = {"native"}
    for op in all_ops().values():
        names.update(op._impls)
    return names


def is_known_provider(name: str) -> bool:
    return name in BUILTIN_PROVIDERS or name in registered_providers()


def implementations(op_name: str | None = None, provider: str | None = None) -> list[Impl]:
    """Registered impls (native included), optionally of one op and/or one provider."""
    ensure_loaded()
    out: list[Impl] = []
    for name, op in all_ops().items():
        if op_name is not None and name != op_name:
            continue
        for p, impl in op.impls().items():
            if provider is None or p == provider:
                out.append(impl)
    return out
