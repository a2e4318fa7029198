"""The pass flags section of `vllm-opt --help`, read from the pass classes.

A pass's description is the first line of its class docstring. An option's name, type
and default come from its dataclass field, its meaning from the docstring under the field
(the attribute-docstring convention of xDSL). So a new pass or option shows up by itself;
one without a docstring shows as UNDOCUMENTED, which the CLI tests reject.

Only `--help` builds this: it imports every pass module (and so torch).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from xdsl.passes import ModulePass, get_pass_option_infos

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


def _class_def(cls: type) -> ast.ClassDef | None:
    try:
        tree = ast.parse(inspect.getsource(sys.modules[cls.__module__]))
    except (OSError, TypeError, KeyError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return node
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def attribute_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring written under it, in cls and its bases (cls wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        node = _class_def(klass)
        if node is None:
            continue
        for field, after in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[field.target.id] = _one_line(after.value.value)
    return docs


def _default(field: dataclasses.Field[object]) -> str:
    if field.default is dataclasses.MISSING:
        return "required" if field.default_factory is dataclasses.MISSING else "computed"
    if field.default is None:
        return "unset"
    if isinstance(field.default, bool):
        return str(field.default).lower()
    return str(field.default)


def _type_name(expected: str) -> str:
    # Annotations are strings here (postponed evaluation); None is said by "unset".
    return expected.strip("'").removesuffix(" | None")


def pass_help(name: str, cls: type[ModulePass]) -> PassHelp:
    node = _class_def(cls)
    doc = ast.get_docstring(node) if node is not None else None
    description = _one_line(doc.split("\n\n")[0]) if doc else _XDSL_DESCRIPTIONS.get(name, "")
    docs = attribute_docs(cls)
    types = {info.name: _type_name(info.expected_type) for info in get_pass_option_infos(cls)}
    options = tuple(
        OptionHelp(f.name.replace("_", "-"), types[f.name], _default(f),
                   docs.get(f.name, UNDOCUMENTED))
        for f in dataclasses.fields(cls)
    )
    return PassHelp(name, description or UNDOCUMENTED, options)


def format_pass_flags(passes: Mapping[str, Callable[[], type[ModulePass]]]) -> str:
    """The help text: one entry per pass flag, each option with type, default, meaning."""
    lines = [
        "pass flags (mlir-opt style; they run in the order given, after any -p pipeline):",
        '  --<pass>  or  --<pass>=key=value  or  --<pass>="key=value key=value"',
        "",
    ]
    classes = {name: factory() for name, factory in passes.items()}
    # This project's passes first, then the generic xDSL ones.
    ordered = sorted(classes, key=lambda n: not classes[n].__module__.startswith("vllm_xdsl"))
    for name in ordered:
        entry = pass_help(name, classes[name])
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
