"""The passes of vllm-xdsl, registered lazily by name so that `vllm-opt` starts fast.

Each pass is a frozen-dataclass `ModulePass` in a module of its own; this table maps the
pass name to `(module, class name)` and nothing is imported until a pass is asked for.
`vllm-opt --help` reads the passes' options from their source through the same table
(vllm_xdsl.tools.pass_help), so that printing them imports no pass (nor torch).

The passes live a folder each (raising/, fusing/, lowering/), with the IR helpers they
share in ir/.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.machinery
import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the table is read where xDSL must not load (the backend's option check)
    from xdsl.passes import ModulePass

PASS_MODULES: dict[str, tuple[str, str]] = {
    "raise-native": ("vllm_xdsl.transforms.raising.raise_native", "RaiseNativePass"),
    "fuse-norm-quant": ("vllm_xdsl.transforms.fusing.fuse_norm_quant", "FuseNormQuantPass"),
    "lower-dispatch": ("vllm_xdsl.transforms.lowering.lower_dispatch", "LowerDispatchPass"),
}

# Generic xDSL passes that are useful between ours.
XDSL_PASSES: dict[str, tuple[str, str]] = {
    "canonicalize": ("xdsl.transforms.canonicalize", "CanonicalizePass"),
    "dce": ("xdsl.transforms.dead_code_elimination", "DeadCodeElimination"),
    "cse": ("xdsl.transforms.common_subexpression_elimination", "CommonSubexpressionElimination"),
}


@dataclass(frozen=True)
class PassRef:
    """A pass class by where it is declared: calling it imports the class (xDSL's pass
    factory); reading `module` and `class_name` imports nothing."""

    module: str
    class_name: str

    def __call__(self) -> type[ModulePass]:
        return getattr(importlib.import_module(self.module), self.class_name)


def module_file(module: str) -> str | None:
    """The source file of `module` (None if it is not installed), found without importing
    it or its packages: `importlib.util.find_spec` imports the parents of a dotted name,
    which would load a pass's folder (and xDSL's transforms) where only its source is read."""
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)  # a top-level name: found without importing
    for part in rest.split(".") if rest else ():
        if spec is None or not spec.submodule_search_locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(
            f"{spec.name}.{part}", list(spec.submodule_search_locations))
    if spec is None or not spec.has_location:
        return None
    return spec.origin


def available_passes() -> dict[str, PassRef]:
    """Pass name -> factory of its class, for every pass whose module is installed."""
    table = {**XDSL_PASSES, **PASS_MODULES}
    return {
        name: PassRef(module, cls)
        for name, (module, cls) in table.items()
        if module_file(module) is not None
    }


def unknown_pass(name: str) -> str | None:
    """Why `name` is not a pass, naming the known ones and the closest (None if it is one)."""
    passes = sorted({**XDSL_PASSES, **PASS_MODULES})  # names only: find_spec imports xDSL
    if name in passes:
        return None
    close = difflib.get_close_matches(name.replace("_", "-"), passes, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown pass '{name}' (known: {', '.join(passes)}){hint}"


def get_pass(name: str) -> type[ModulePass]:
    """The pass class named `name`; ValueError naming the known passes otherwise."""
    problem = unknown_pass(name)
    if problem is not None:
        raise ValueError(problem)
    return available_passes()[name]()
