"""The pass flags section of `vllm-opt --help`, read from the pass classes' source.

A pass's description is the first line of its class docstring. An option's name, type
and default come from its dataclass field, its meaning from the docstring under the field
(the attribute-docstring convention of xDSL). So a new pass or option shows up by itself;
one without a docstring shows as UNDOCUMENTED, which the CLI tests reject.

The declarations are read with `ast` from the source file of each pass module, found by
path (`transforms.module_file`), not imported: importing the passes imports torch, which costs
seconds that `--help` has no use for. The fields are the ones `dataclasses` would make: the
annotated class attributes of the class and of its dataclass bases (resolved through the
module's `from ... import`), ClassVars excluded. test_vllm_opt_help checks that what this
reads agrees with `dataclasses.fields` of the imported classes.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_xdsl.transforms import module_file

if TYPE_CHECKING:
    from xdsl.passes import ModulePass

UNDOCUMENTED = "(undocumented)"
# xDSL's generic passes that have no docstring of their own.
_XDSL_DESCRIPTIONS = {
    "dce": "Remove operations whose results are unused and that have no side effects.",
    "cse": "Common subexpression elimination: merge identical side-effect-free operations.",
}
_WIDTH = 92


@dataclass(frozen=True)
class OptionHelp:
    name: str
    type: str
    default: str
    meaning: str


@dataclass(frozen=True)
class PassHelp:
    name: str
    description: str
    options: tuple[OptionHelp, ...]


@dataclass(frozen=True)
class _Field:
    annotation: str
    default: str
    doc: str | None


@dataclass(frozen=True)
class _ClassSource:
    module: str
    node: ast.ClassDef
    tree: ast.Module


@cache
def _module_tree(module: str) -> ast.Module | None:
    """The parsed source of `module`: of the loaded module if it is imported (it may come
    from a file module_file does not find, e.g. a test), else of its file, unimported."""
    try:
        if module in sys.modules:
            source = inspect.getsource(sys.modules[module])
        else:
            path = module_file(module)  # its file, found without importing its packages
            if path is None:
                return None
            with open(path, encoding="utf-8") as f:
                source = f.read()
        return ast.parse(source)
    except (OSError, TypeError, ValueError, ImportError, SyntaxError):
        return None


def _class_source(module: str, name: str) -> _ClassSource | None:
    tree = _module_tree(module)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return _ClassSource(module, node, tree)
        if isinstance(node, ast.ImportFrom):  # a class re-exported from another module
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _class_source(_absolute(module, node), alias.name)
    return None


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module a `from ... import` names, relative imports resolved against `module`."""
    if not node.level:
        return node.module or ""
    try:
        path = module_file(module)
    except (ImportError, ValueError):  # ValueError: a module without a spec (__main__)
        path = None
    is_package = path is not None and Path(path).name == "__init__.py"
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _base(cls: _ClassSource, expr: ast.expr) -> _ClassSource | None:
    """The class a base expression of `cls` names, if its source can be found."""
    if isinstance(expr, ast.Name):
        return _class_source(cls.module, expr.id)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        for node in cls.tree.body:  # `import a.b as m` ... `class P(m.Base)`
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if (alias.asname or alias.name) == expr.value.id:
                        return _class_source(alias.name, expr.attr)
    return None


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _shown(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _field_names(tree: ast.Module) -> set[str]:
    """The names `dataclasses.field` goes by in a module (`field`, an alias)."""
    names = {"dataclasses.field"}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "dataclasses":
            names |= {alias.asname or alias.name for alias in node.names
                      if alias.name == "field"}
    return names


def _default(value: ast.expr | None, field_names: set[str]) -> str:
    if value is None:
        return "required"
    if isinstance(value, ast.Call) and ast.unparse(value.func) in field_names:
        keywords = {k.arg: k.value for k in value.keywords}
        if "default" in keywords:
            return _default(keywords["default"], field_names)
        return "computed" if "default_factory" in keywords else "required"
    try:
        return _shown(ast.literal_eval(value))
    except ValueError:
        return ast.unparse(value)


def _annotation(expr: ast.expr) -> str:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value  # a quoted annotation
    return ast.unparse(expr)


def _fields(cls: _ClassSource) -> dict[str, _Field]:
    """Field name -> declaration, in dataclass order: the dataclass bases' fields (the
    first base last), then the class's own; a redeclared field keeps its place."""
    fields: dict[str, _Field] = {}
    for expr in reversed(cls.node.bases):
        base = _base(cls, expr)
        if base is not None:
            fields.update(_fields(base))
    if not _is_dataclass(cls.node):
        return fields  # its own annotations are no fields
    body = cls.node.body
    field_names = _field_names(cls.tree)
    for i, stmt in enumerate(body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        annotation = _annotation(stmt.annotation)
        if annotation.split("[")[0].split(".")[-1] == "ClassVar":
            continue
        after = body[i + 1] if i + 1 < len(body) else None
        doc = (_one_line(after.value.value) if isinstance(after, ast.Expr)
               and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)
               else None)
        name = stmt.target.id
        inherited = fields.get(name)
        fields[name] = _Field(annotation, _default(stmt.value, field_names),
                              doc or (inherited.doc if inherited else None))
    return fields


def _type_name(annotation: str) -> str:
    # None is said by the default ("unset").
    return annotation.removesuffix(" | None")


def pass_help_at(name: str, module: str, class_name: str) -> PassHelp:
    """The help of pass `name`, declared as `class_name` in `module`, read from its source."""
    cls = _class_source(module, class_name)
    doc = ast.get_docstring(cls.node) if cls is not None else None
    description = _one_line(doc.split("\n\n")[0]) if doc else _XDSL_DESCRIPTIONS.get(name, "")
    fields = _fields(cls) if cls is not None else {}
    options = tuple(
        OptionHelp(field.replace("_", "-"), _type_name(f.annotation), f.default,
                   f.doc or UNDOCUMENTED)
        for field, f in fields.items()
    )
    return PassHelp(name, description or UNDOCUMENTED, options)


def pass_help(name: str, cls: type[ModulePass]) -> PassHelp:
    """The help of an imported pass class (read from its module's source all the same)."""
    return pass_help_at(name, cls.__module__, cls.__qualname__)


def _where(factory: Callable[[], type[ModulePass]]) -> tuple[str, str]:
    """(module, class name) of a pass factory: without importing for a transforms.PassRef,
    else by calling it."""
    module, class_name = getattr(factory, "module", None), getattr(factory, "class_name", None)
    if isinstance(module, str) and isinstance(class_name, str):
        return module, class_name
    cls = factory()
    return cls.__module__, cls.__qualname__


def format_pass_flags(passes: Mapping[str, Callable[[], type[ModulePass]]]) -> str:
    """The help text: one entry per pass flag, each option with type, default, meaning."""
    lines = [
        "pass flags (mlir-opt style; they run in the order given, after any -p pipeline):",
        '  --<pass>  or  --<pass>=key=value  or  --<pass>="key=value key=value"',
        "",
    ]
    where = {name: _where(factory) for name, factory in passes.items()}
    # This project's passes first, then the generic xDSL ones.
    ordered = sorted(where, key=lambda n: not where[n][0].startswith("vllm_xdsl"))
    for name in ordered:
        entry = pass_help_at(name, *where[name])
        lines.append(f"  --{entry.name}")
        lines += textwrap.wrap(entry.description, _WIDTH, initial_indent=" " * 6,
                               subsequent_indent=" " * 6)
        for option in entry.options:
            head = f"{option.name}: {option.type} (default: {option.default})"
            lines.append(f"      {head}")
            lines += textwrap.wrap(option.meaning, _WIDTH, initial_indent=" " * 10,
                                   subsequent_indent=" " * 10)
    return "\n".join(lines)


def add_pass_help(
    parser: argparse.ArgumentParser, passes: Mapping[str, Callable[[], type[ModulePass]]]
) -> None:
    """Append the pass flags to the parser's help, keeping their layout."""
    parser.epilog = format_pass_flags(passes)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
