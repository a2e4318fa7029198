"""The packages of vllm_xdsl form a DAG in layers: every import points downward.

The graph is read from the source with `ast`, and it counts every way one module can reach
another, whether or not it runs at import time:

- `import` and `from ... import`, at module level, inside functions (a lazy import that
  hides a cycle is still one) and under `if TYPE_CHECKING:` (a type needed for an
  annotation is a dependency all the same: it is what decides where a module may live);
- a string that names a module of the package (`"vllm_xdsl.x.y"` or `"vllm_xdsl.x.y:attr"`),
  as lazy tables of dialects, passes and targets hold them;
- a string template of module names (`f"vllm_xdsl.dialects.{p}"`, `"vllm_xdsl.{}.x"`):
  an edge to every module it can spell.

Strings that another module resolves (the core catalog names each op's native as
"module:function", imported by ops/op.py) are that module's edges: RESOLVED_BY says whose.

A dynamic import whose name is none of these (`importlib.import_module(name)` with a
computed `name`, `__import__`, `runpy.run_module`, under any alias) cannot be resolved, so it is forbidden except at the few
sites listed in DATA_NAMED_IMPORTS, each with why its names are already counted or are not
this package's. Providers and the tuner attach through the `vllm_xdsl.providers` entry
points (package metadata, not code): a lower layer never names them.

Checked: (a) no cycle between packages (each subpackage of vllm_xdsl, and each top-level
module, is one unit), (b) no cycle among the modules of `vllm_xdsl.ops`, (c) every edge
goes from a layer to the same or a lower one in LAYERS. Every module must have a layer.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

import vllm_xdsl

PACKAGE_DIR = Path(vllm_xdsl.__file__).parent
ROOT = PACKAGE_DIR.name

# Lowest first. A unit is a subpackage (`ops`) or a top-level module (`verify`);
# `tune.__main__` is a command line and sits with the tools, above the tuner it drives.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Torch-free declarations, and helpers that import nothing of the package.
    ("core", ("core", "user_cache")),
    # Natives, torch custom ops, registry, policy, dispatch.
    ("ops", ("ops",)),
    ("dialects", ("dialects",)),
    ("frontend / transforms", ("frontend", "transforms", "pass_options", "pipeline_options")),
    ("backends", ("backends",)),
    # Consumers of every registered implementation: verify checks them against the
    # contract, the tuner times them (and uses verify's check). They attach to the ops
    # layer by registration; nothing below names them.
    ("verify / tune", ("verify", "tune")),
    ("pipeline / compile / tools", (
        "pipeline", "compile", "backend_options", "cache_key", "post_grad", "tools",
        "tune.__main__", "demo", "models", "examples", "__init__")),
)

# Modules that import a computed name, and why that hides no edge of the package.
DATA_NAMED_IMPORTS: dict[str, str] = {
    "vllm_xdsl.dialects": "names from DIALECT_MODULES, whose strings are counted",
    "vllm_xdsl.transforms": "names from PASS_MODULES / XDSL_PASSES, whose strings are counted",
    "vllm_xdsl.tools.vllm_opt": "names from TARGETS, whose strings are counted",
    "vllm_xdsl.backends.torch_export.semantic":
        "names from PROVIDER_MODULES / _MODULE_OF, whose strings and templates are counted",
    "vllm_xdsl.ops.op": "the natives named by the core catalog, counted as this module's",
    "vllm_xdsl.dialects.call_targets":
        "the module of a call target named in an FX graph (operator, math, torch)",
}

# Modules whose module-naming strings are data another module imports: those edges are
# the importer's (which must do a dynamic import: it is in DATA_NAMED_IMPORTS).
RESOLVED_BY: dict[str, str] = {
    "vllm_xdsl.core.catalog": "vllm_xdsl.ops.op",  # each spec's native, "module:function"
}

_DYNAMIC_IMPORTERS = {"import_module", "__import__", "run_module"}
_MODULE_STRING = re.compile(rf"{ROOT}(\.\w+)*(:[\w.]+)?\Z")
_FIELD = r"\w+(?:\.\w+)*"  # what one formatted field may spell in a module name


@dataclass
class Graph:
    edges: dict[str, set[str]] = field(default_factory=dict)
    # (module, line, source text) of each dynamic import with an unresolvable name.
    unresolved: list[tuple[str, int, str]] = field(default_factory=list)


def module_files(root: Path = PACKAGE_DIR) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package __init__)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _resolve(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _from_import(node: ast.ImportFrom, module: str, is_package: bool,
                 modules: dict[str, tuple[Path, bool]]) -> list[str]:
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    # `from pkg import sub` names the module pkg.sub; `from pkg import NAME`, pkg itself.
    subs = [f"{base}.{a.name}" for a in node.names]
    found = [s for s in subs if s in modules]
    return found if len(found) == len(subs) else [*found, base]


def _template(node: ast.AST, module: str) -> str | None:
    """A regex for the module names an f-string or a `"...{}...".format(...)` can spell."""
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(re.escape(str(v.value)))
            elif (isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name)
                  and v.value.id == "__name__"):
                parts.append(re.escape(module))
            else:
                parts.append(_FIELD)
        return "".join(parts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format" and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)):
        node = node.func.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "{" in node.value:
        pieces = re.split(r"\{[^{}]*\}", node.value)
        return _FIELD.join(re.escape(p) for p in pieces)
    return None


def _spelled(pattern: str, modules: dict[str, tuple[Path, bool]]) -> list[str]:
    if not pattern.startswith(re.escape(ROOT + ".")):
        return []
    rx = re.compile(pattern + r"(?::[\w.]+)?\Z")
    return [m for m in modules if rx.match(m)]


def _string_target(value: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    if not _MODULE_STRING.match(value):
        return None
    target = _resolve(value.partition(":")[0], modules)
    return None if target == ROOT else target


def _importer_aliases(tree: ast.AST) -> set[str]:
    """The names a module calls the dynamic importers by (`import_module as load`)."""
    names = set(_DYNAMIC_IMPORTERS)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname for a in node.names if a.name in _DYNAMIC_IMPORTERS and a.asname)
    return names


def _is_dynamic_import(node: ast.AST, importers: set[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return name in importers


def import_graph(modules: dict[str, tuple[Path, bool]] | None = None,
                 resolved_by: dict[str, str] | None = None) -> Graph:
    """Module -> the modules of the package it imports or names (anywhere in the file)."""
    modules = module_files() if modules is None else modules
    resolved_by = RESOLVED_BY if resolved_by is None else resolved_by
    graph = Graph()
    handed: dict[str, set[str]] = {}  # resolver -> the modules others' strings name
    for module, (path, is_package) in modules.items():
        source = path.read_text()
        tree = ast.parse(source, str(path))
        targets: set[str] = set()
        named: set[str] = set()  # by strings
        # Strings not read one by one: the literal pieces of an f-string (read as one
        # template) and the names of loggers.
        pieces = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)
                  for v in n.values}
        pieces |= {id(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
                   and isinstance(n.func, ast.Attribute) and n.func.attr == "getLogger"}
        importers = _importer_aliases(tree)
        for node in ast.walk(tree):
            names: list[str] = []
            strings: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = _from_import(node, module, is_package, modules)
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in pieces):
                strings = [t for t in [_string_target(node.value, modules)] if t]
                pattern = _template(node, module)
                if pattern:
                    strings += _spelled(pattern, modules)
            elif isinstance(node, ast.JoinedStr):
                strings = _spelled(_template(node, module) or "", modules)
            if _is_dynamic_import(node, importers):
                assert isinstance(node, ast.Call)
                arg = node.args[0] if node.args else None
                resolved = (isinstance(arg, ast.Constant) and isinstance(arg.value, str)) or (
                    arg is not None and _template(arg, module) is not None)
                if not resolved:
                    graph.unresolved.append((module, node.lineno, ast.unparse(node)))
            targets.update(t for t in (_resolve(n, modules) for n in names) if t)
            named.update(t for t in (_resolve(n, modules) for n in strings) if t)
        if module in resolved_by:
            handed.setdefault(resolved_by[module], set()).update(named)
        else:
            targets |= named
        targets.discard(module)
        graph.edges[module] = targets
    for resolver, named in handed.items():
        graph.edges[resolver] |= named - {resolver}
    return graph


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return cycles


def unit_of(module: str) -> str:
    """The package unit of a module: `vllm_xdsl.ops.op` -> `ops`, the root -> `__init__`."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__"
    if parts[-1] == "__main__" and ".".join(parts) in _LAYER_OF:
        return ".".join(parts)
    return parts[0]


_LAYER_OF: dict[str, int] = {u: i for i, (_, units) in enumerate(LAYERS) for u in units}


def unit_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, targets in edges.items():
        ua = unit_of(a)
        out.setdefault(ua, set()).update(unit_of(b) for b in targets if unit_of(b) != ua)
    return out


def _cycle_edges(cycle: list[str], edges: dict[str, set[str]],
                 key=lambda m: m) -> list[str]:
    return [f"{a} -> {b}" for a in sorted(edges) for b in sorted(edges[a])
            if key(a) in cycle and key(b) in cycle and key(a) != key(b)]


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for a in sorted(edges):
        for b in sorted(edges[a]):
            la, lb = _LAYER_OF[unit_of(a)], _LAYER_OF[unit_of(b)]
            if lb > la:
                bad.append(f"{a} ({LAYERS[la][0]}) -> {b} ({LAYERS[lb][0]})")
    return bad


# --- the checker checks ----------------------------------------------------------------


def test_the_cycle_finder_finds_cycles():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert find_cycles(edges) == [["a", "b", "c"]]


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, tuple[Path, bool]]:
    pkg = tmp_path / ROOT
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return module_files(pkg)


def test_the_graph_reads_every_kind_of_import(tmp_path):
    modules = _package(tmp_path, {
        "__init__.py": "",
        "sub/__init__.py": "from vllm_xdsl.sub import leaf\nNAME = 1\n",
        "sub/leaf.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from vllm_xdsl import top\n"
            "def f():\n    from . import NAME\n"),
        "top.py": "import importlib\nimportlib.import_module('vllm_xdsl.sub.leaf')\n",
        "sub/lazy.py": "def f():\n    from .. import top\n",
        "table.py": "T = {'x': ('vllm_xdsl.top', 'X'), 'y': 'vllm_xdsl.sub.lazy:f', 'z': 'vllm_xdsl'}\n",
        "plug/__init__.py": "",
        "plug/a.py": "",
        "plug/b.py": "",
        "fmt.py": ("import importlib\nP = 'vllm_xdsl.plug.{}'\n"
                   "def f(n):\n    return importlib.import_module(f'vllm_xdsl.plug.{n}')\n"),
        "fmt2.py": "def f(n):\n    return 'vllm_xdsl.{}.a'.format(n)\n",
        "own.py": "import importlib\nimportlib.import_module(f'{__name__}_not')\n",
        "hidden.py": "import importlib\ndef f(n):\n    return importlib.import_module(n)\n",
        "hidden2.py": "def f(n):\n    return __import__(n)\n",
        "hidden3.py": "from importlib import import_module as load\nload(input())\n",
        "log.py": "import logging\nlog = logging.getLogger('vllm_xdsl.top')\n",
        "specs.py": "NATIVE = 'vllm_xdsl.plug.a:f'\n",
        "loader.py": "import importlib\ndef f(n):\n    return importlib.import_module(n)\n",
    })
    graph = import_graph(modules, {"vllm_xdsl.specs": "vllm_xdsl.loader"})
    e = graph.edges
    assert e["vllm_xdsl.sub"] == {"vllm_xdsl.sub.leaf"}
    assert e["vllm_xdsl.sub.leaf"] == {"vllm_xdsl.top", "vllm_xdsl.sub"}  # TYPE_CHECKING too
    assert e["vllm_xdsl.top"] == {"vllm_xdsl.sub.leaf"}
    assert e["vllm_xdsl.sub.lazy"] == {"vllm_xdsl.top"}
    assert e["vllm_xdsl.table"] == {"vllm_xdsl.top", "vllm_xdsl.sub.lazy"}
    plug = {"vllm_xdsl.plug", "vllm_xdsl.plug.a", "vllm_xdsl.plug.b"}
    assert e["vllm_xdsl.fmt"] == plug - {"vllm_xdsl.plug"}
    assert e["vllm_xdsl.fmt2"] == {"vllm_xdsl.plug.a"}
    assert e["vllm_xdsl.own"] == set()
    assert e["vllm_xdsl.log"] == set()
    assert e["vllm_xdsl.specs"] == set() and e["vllm_xdsl.loader"] == {"vllm_xdsl.plug.a"}
    assert sorted((m, line) for m, line, _ in graph.unresolved) == [
        ("vllm_xdsl.hidden", 3), ("vllm_xdsl.hidden2", 2), ("vllm_xdsl.hidden3", 2),
        ("vllm_xdsl.loader", 3)]
    assert find_cycles(e) == [["vllm_xdsl.sub", "vllm_xdsl.sub.leaf", "vllm_xdsl.top"]]


def test_layer_check_names_an_upward_edge():
    edges = {"vllm_xdsl.ops.registry": {"vllm_xdsl.backends.triton.provider"},
             "vllm_xdsl.backends.triton.provider": {"vllm_xdsl.ops.registry"}}
    assert layer_violations(edges) == [
        "vllm_xdsl.ops.registry (ops) -> vllm_xdsl.backends.triton.provider (backends)"]
    assert find_cycles(unit_edges(edges)) == [["backends", "ops"]]


# --- the package -------------------------------------------------------------------------


GRAPH = import_graph()


def test_the_whole_package_was_read():
    assert len(GRAPH.edges) > 50
    assert "vllm_xdsl.ops.op" in GRAPH.edges["vllm_xdsl.ops"]


def test_every_module_has_a_layer():
    missing = sorted({unit_of(m) for m in GRAPH.edges} - set(_LAYER_OF))
    assert not missing, f"units without a layer in LAYERS: {missing}"


def test_no_unresolved_dynamic_import():
    hidden = [f"{m}:{line}: {text}" for m, line, text in GRAPH.unresolved
              if m not in DATA_NAMED_IMPORTS]
    assert not hidden, "dynamic imports of computed names (resolve or remove):\n" + \
        "\n".join(hidden)
    stale = sorted(set(DATA_NAMED_IMPORTS) - {m for m, _, _ in GRAPH.unresolved})
    assert not stale, f"DATA_NAMED_IMPORTS lists modules without such an import: {stale}"
    assert set(RESOLVED_BY.values()) <= set(DATA_NAMED_IMPORTS)
    assert set(RESOLVED_BY) <= set(GRAPH.edges), "RESOLVED_BY names a module that is gone"


def test_no_cycle_between_packages():
    units = unit_edges(GRAPH.edges)
    cycles = find_cycles(units)
    assert not cycles, "\n".join(
        f"cycle {c}: " + "; ".join(_cycle_edges(c, GRAPH.edges, unit_of)) for c in cycles)


def test_no_cycle_inside_ops():
    ops = {m: {t for t in ts if t.startswith("vllm_xdsl.ops.") or t == "vllm_xdsl.ops"}
           for m, ts in GRAPH.edges.items() if unit_of(m) == "ops"}
    cycles = find_cycles(ops)
    assert not cycles, "\n".join("cycle: " + "; ".join(_cycle_edges(c, ops)) for c in cycles)


def test_every_edge_points_down_the_layers():
    bad = layer_violations(GRAPH.edges)
    assert not bad, f"{len(bad)} upward edge(s):\n" + "\n".join(bad)


def test_registered_entry_points_sit_above_the_ops_layer():
    """What attaches by registration (providers, the tuner) must live above the registry
    that loads it, or the registration would hide a downward dependency turned upward."""
    pyproject = PACKAGE_DIR.parent / "pyproject.toml"
    groups = tomllib.loads(pyproject.read_text())["project"].get("entry-points", {})
    providers = groups.get("vllm_xdsl.providers", {})
    for name, value in providers.items():
        target = _resolve(value.partition(":")[0], module_files())
        assert target is not None and target != ROOT, f"entry point {name}: {value} not found"
        assert _LAYER_OF[unit_of(target)] > _LAYER_OF["ops"], (name, value)
