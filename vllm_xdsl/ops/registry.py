"""Where implementations come from: providers that register through entry points.

Everything that registers with this registry (the built-in backends triton, cuda and rocm,
the tuner's `auto` policy, out-of-tree providers) is an entry point of the group
`vllm_xdsl.providers`: a zero-argument callable (called) or a module (imported). This
module names none of them: the ops layer never imports a layer above it, and a built-in
provider attaches exactly as an out-of-tree one does (pyproject.toml lists ours).

Providers are loaded lazily, on the first registry query that needs them (not at import,
so `import vllm_xdsl.ops` stays cheap and a CPU-only eager call never imports Triton).

This package's own entry points are read from the source checkout it runs from, when it
runs from one (an editable install or PYTHONPATH): installed metadata is written at
install time and does not follow later edits of pyproject.toml. Every other
distribution's come from its installed metadata.

Loading is re-entrant: a provider that imports `vllm_xdsl.ops` or queries the registry
while it loads sees the registry as it is so far, without deadlock or recursion. A provider
that fails to load is skipped with one warning and recorded in `load_errors()`.
"""

from __future__ import annotations

import threading
import types
import warnings
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vllm_xdsl.ops.impl import DeclaredOp, Impl

ENTRY_POINT_GROUP = "vllm_xdsl.providers"
DISTRIBUTION = "vllm-xdsl"
# The providers the platform defaults name (policy.PLATFORM_DEFAULTS): known even where
# their entry point failed to load, so a priority naming them is not a syntax error.
BUILTIN_PROVIDERS: tuple[str, ...] = ("cuda", "rocm", "triton", "cpu")

# Every declared op by name, in declaration order (SemanticOp declares itself here).
_ops: dict[str, DeclaredOp] = {}
_lock = threading.RLock()
_loaded = False
_loading = False
_load_errors: list[str] = []

# How a provider's kernel is configured, decided from argument metadata alone:
# rule(op=<name>, dtype=<x's dtype>, width=<row width>, scheme=<QuantScheme or None>) ->
# {property: int} (e.g. triton's block_size and num_warps). lower-dispatch records them on
# the provider op; the provider registers its rule with its impls.
PropertyRule = Callable[..., dict[str, int]]
_property_rules: dict[str, PropertyRule] = {}


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-")


def checkout_entry_points(root: Path | None = None) -> list[EntryPoint] | None:
    """This package's entry points from the pyproject.toml of the checkout it runs from
    (`root`: that checkout's directory), or None when it does not run from one."""
    root = Path(__file__).resolve().parents[2] if root is None else root
    pyproject = root / "pyproject.toml"
    try:
        import tomllib
    except ImportError:  # Python 3.10: installed metadata only
        return None
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if _normalized(str(project.get("name", ""))) != DISTRIBUTION:
        return None
    table = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    return [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in table.items()]


def provider_entry_points() -> list[EntryPoint]:
    """The entry points to load: this package's first, then other distributions'."""
    own = checkout_entry_points()
    ours: list[EntryPoint] = list(own or [])
    others: list[EntryPoint] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        is_ours = dist is not None and _normalized(dist.name) == DISTRIBUTION
        if is_ours and own is not None:
            continue  # the checkout's own table is the current one
        (ours if is_ours else others).append(ep)
    return ours + others


def ensure_loaded() -> None:
    """Load every provider entry point once (re-entrant; thread-safe)."""
    global _loaded, _loading
    if _loaded:
        return
    with _lock:
        if _loaded or _loading:  # _loading: a provider queried us while it loads
            return
        _loading = True
        try:
            for ep in provider_entry_points():
                _load_entry_point(ep)
        finally:
            _loaded = True
            _loading = False
        changed()


def _fail(what: str, e: BaseException) -> None:
    msg = f"vllm_xdsl: provider {what} failed to load, skipped: {type(e).__name__}: {e}"
    _load_errors.append(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _load_entry_point(ep: EntryPoint) -> None:
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


def declare(op: DeclaredOp) -> None:
    """Enter a newly declared op in the table (ValueError if its name is taken)."""
    if op.name in _ops:
        raise ValueError(f"op {op.name!r} is declared twice")
    _ops[op.name] = op


def all_ops() -> dict[str, DeclaredOp]:
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


def register_property_rule(provider: str, rule: PropertyRule) -> None:
    """Set `provider`'s implementation-property rule (see PropertyRule); replaces any."""
    _property_rules[provider] = rule


def property_rule(provider: str) -> PropertyRule | None:
    """`provider`'s implementation-property rule (providers loaded), or None."""
    ensure_loaded()
    return _property_rules.get(provider)
