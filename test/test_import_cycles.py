"""No import cycle among the modules of vllm_xdsl: each layer imports only downward.

The graph is read from the source with `ast`: every `import` and `from ... import`, at
module level and inside functions alike (a lazy import that hides a cycle is still one),
plus `importlib.import_module("vllm_xdsl....")` with a literal name. Imports under
`if TYPE_CHECKING:` are left out: they never run, and only name a type for annotations.
`from pkg import name` is an edge to the module `pkg.name` where that is a module, else
to `pkg` (its __init__.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import vllm_xdsl

PACKAGE_DIR = Path(vllm_xdsl.__file__).parent


def module_files(root: Path = PACKAGE_DIR) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package __init__)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks (not their else branch)."""
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return hidden


def _imported_names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module if is_package else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        return [f"{base}.{a.name}" for a in node.names] + [base]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return [node.args[0].value]
    return []


def _resolve(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, tuple[Path, bool]] | None = None) -> dict[str, set[str]]:
    """Module -> the vllm_xdsl modules it imports (anywhere in the file)."""
    modules = module_files() if modules is None else modules
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        hidden = _type_checking_only(tree)
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in hidden:
                continue
            names = _imported_names(node, module, is_package)
            if isinstance(node, ast.ImportFrom):
                # `from pkg import sub` names the module pkg.sub; otherwise pkg itself.
                *subs, base = names
                found = [s for s in subs if s in modules]
                names = found if len(found) == len(subs) else [*found, base]
            targets.update(t for t in (_resolve(n, modules) for n in names) if t)
        targets.discard(module)
        graph[module] = targets
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def _describe(cycle: list[str], graph: dict[str, set[str]]) -> str:
    edges = [f"{a} -> {b}" for a in cycle for b in sorted(graph[a]) if b in cycle]
    return "cycle: " + "; ".join(edges)


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert find_cycles(graph) == [["a", "b", "c"]]


def test_the_graph_reads_every_kind_of_import(tmp_path):
    pkg = tmp_path / "vllm_xdsl"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from vllm_xdsl.sub import leaf\nNAME = 1\n")
    (pkg / "sub" / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from vllm_xdsl import top\n"
        "def f():\n    from .. import top\n    from . import NAME\n")
    (pkg / "top.py").write_text(
        "import importlib\nimportlib.import_module('vllm_xdsl.sub.leaf')\n")
    graph = import_graph(module_files(pkg))
    assert graph == {
        "vllm_xdsl": set(),
        "vllm_xdsl.sub": {"vllm_xdsl.sub.leaf"},
        "vllm_xdsl.sub.leaf": {"vllm_xdsl.top", "vllm_xdsl.sub"},
        "vllm_xdsl.top": {"vllm_xdsl.sub.leaf"},
    }
    assert find_cycles(graph) == [["vllm_xdsl.sub", "vllm_xdsl.sub.leaf", "vllm_xdsl.top"]]


def test_vllm_xdsl_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 50  # the whole package was read
    cycles = find_cycles(graph)
    assert not cycles, "\n".join(_describe(c, graph) for c in cycles)
