"""Generate vllm_xdsl/dialects/vllm.py, the `vllm` dialect's ops, from the catalog.

    python -m vllm_xdsl.tools.gen_vllm_dialect           # rewrite vllm.py
    python -m vllm_xdsl.tools.gen_vllm_dialect --check   # exit 1 if vllm.py is stale

As MLIR's ODS generates op classes from TableGen records, this writes one real class per
semantic op (a reader can find `GeluAndMulOp`, and its syntax is its family's, one import
away) from the one declaration of the op, its catalog spec. What is per op is data there:
the name, the family, the activation, an act-and-mul member's own scalar parameters (its
properties), an unfused quant's form, operands, scheme properties and syntax. What is per
family is code, written by hand in dialects/vllm_families.py: the operands, the assembly
format and the verifier of each family, and the bespoke signature of each norm op. test_gen_vllm_dialect.py
fails while vllm.py and the catalog disagree, so the generated file is never edited by hand.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

from vllm_xdsl.core import catalog
from vllm_xdsl.core.catalog import OpSpec, Param
from vllm_xdsl.dialects import vllm_families, vllm_interfaces
from vllm_xdsl.dialects.vllm_interfaces import op_class_name

TARGET = Path(vllm_families.__file__).with_name("vllm.py")

_HEADER = '''"""The `vllm` dialect: one op per semantic operation of docs/OPS.md.

GENERATED from vllm_xdsl/core/catalog.py by `python -m vllm_xdsl.tools.gen_vllm_dialect`:
do not edit. Change the catalog (or a family in vllm_families.py, where each family's
operands, syntax and verifier are written, with examples) and run it again.
"""
'''

# The act-and-mul families' members are generated on these bases; every other op's
# signature is written in vllm_families.py.
_ACT_BASES = {
    ("act_and_mul", False): "_ActAndMulSignature",
    ("act_and_mul", True): "_ActAndMulQuantSignature",
    ("sparse_act_and_mul", False): "_ActAndMulSignature",
}
# A member's own scalar parameter -> its property's constraint (builtin attributes).
_PROPERTY_TYPES = {"float": "FloatAttr[Float64Type]", "int": "IntegerAttr[I64]",
                   "str": "StringAttr", "bool": "BoolAttr"}
# An unfused quant's parameters that are not properties: its quant dtype is its result's
# element type, the variant a property of the family, the zero point an operand of it.
_QUANT_FAMILY_PARAMS = ("fp8_dtype", "variant", "zero_point")


# Names the generated module takes from elsewhere (typing, xDSL), not from the families.
_GENERATED_ELSEWHERE = {"ClassVar", "Dialect", "irdl_op_definition", "prop_def", "opt_prop_def",
                        "FloatAttr", "Float64Type", "I64", "IntegerAttr", "StringAttr",
                        "BoolAttr", "TensorType", "operand_def", "opt_operand_def",
                        "result_def"}
_BUILTIN = {"BoolAttr", "FloatAttr", "Float64Type", "I64", "IntegerAttr", "StringAttr",
            "TensorType"}


class GenerateError(Exception):
    """The catalog asks for something the generator cannot derive."""


def _property(spec: OpSpec, p: Param) -> tuple[str, str]:
    """(the property's definition, its constraint)."""
    if p.kind not in _PROPERTY_TYPES:
        raise GenerateError(f"{spec.name}: parameter {p.name!r} of kind {p.kind!r}: a "
                            f"generated member's own parameters are {', '.join(_PROPERTY_TYPES)}")
    define = "opt_prop_def" if p.has_default or p.optional else "prop_def"
    return define, _PROPERTY_TYPES[p.kind]


def _keyword(name: str) -> str:
    return f"(`{name}` `(` ${name}^ `:` type(${name}) `)`)?"


def _quant_member(spec: OpSpec, name: str, names: set[str]) -> list[str]:
    """An unfused quant's signature: its tensors (required ones positional, optional ones
    after their keyword), its scheme properties and results, in the native's order."""
    tensors = [p for p in spec.params if p.is_tensor and p.name not in _QUANT_FAMILY_PARAMS]
    required = [p.name for p in tensors if not p.optional]
    parts = [" `,` ".join(f"${n}" for n in required)]
    parts += [_keyword(p.name) for p in tensors if p.optional] + [_keyword("zero_point")]
    parts.append("attr-dict `:` " + " `,` ".join(f"type(${n})" for n in required) + " `->` "
                 + " `,` ".join(f"type(${r})" for r in spec.result_names))
    names |= {"_UnfusedQuantSignature", "ClassVar", "TensorType", "result_def"}
    lines = ["", "", f"class {name}(_UnfusedQuantSignature):",
             f'    SEMANTIC_NAME: ClassVar[str] = "{spec.name}"',
             "    assembly_format = (",
             *(f'        "{part}{" " if i < len(parts) - 1 else ""}"'
               for i, part in enumerate(parts)),
             "    )"]
    for p in tensors:
        define = "opt_operand_def" if p.optional else "operand_def"
        names.add(define)
        lines.append(f"    {p.name} = {define}(TensorType)")
    for p in spec.params:
        if not p.is_tensor and p.name not in _QUANT_FAMILY_PARAMS:
            define, constraint = _property(spec, p)
            names |= {define, *constraint.replace("[", " ").replace("]", " ").split()}
            lines.append(f"    {p.name} = {define}({constraint})")
    lines += [f"    {r} = result_def(TensorType)" for r in spec.result_names]
    return lines


def _signature(spec: OpSpec, names: set[str]) -> tuple[str, list[str]]:
    """(the signature class's name, the lines that declare it, empty if hand-written);
    adds the names those lines use to `names`."""
    name = op_class_name(spec.name).removesuffix("Op") + "Signature"
    if spec.form is not None:
        return name, _quant_member(spec, name, names)
    base = _ACT_BASES.get((spec.family, spec.fused))
    if base is None:
        written = getattr(vllm_families, name, None)
        if getattr(written, "SEMANTIC_NAME", None) != spec.name:
            raise GenerateError(f"{spec.name}: vllm_families.py has no {name} for it (a "
                                f"{spec.family} op's signature is written by hand)")
        names.add(name)
        return name, []
    names |= {base, "ClassVar"}
    lines = [
        "", "",
        f"class {name}({base}):",
        f'    SEMANTIC_NAME: ClassVar[str] = "{spec.name}"',
        f'    ACTIVATION: ClassVar[str] = "{spec.activation}"',
    ]
    for p in spec.own_scalars:
        define, constraint = _property(spec, p)
        names |= {define, *constraint.replace("[", " ").replace("]", " ").split()}
        lines.append(f"    {p.name} = {define}({constraint})")
    return name, lines


def _public(module: ModuleType) -> set[str]:
    """The classes and functions `module` defines, re-exported (`vllm.NormOp`, ...)."""
    return {n for n, v in vars(module).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__}


def _isort_key(name: str) -> tuple[int, str]:
    # isort's (and ruff's) order by type: CONSTANTS, Classes, functions.
    bare = name.lstrip("_")
    return (0 if bare.isupper() else 1 if bare[:1].isupper() else 2, name)


def render() -> str:
    """The text of vllm.py for the current catalog."""
    names: set[str] = {"SemanticSignature", "ATTRIBUTES", "irdl_op_definition", "Dialect"}
    signatures: list[str] = []
    body: list[str] = []
    for spec in catalog.SPECS.values():
        sig, lines = _signature(spec, names)
        signatures.append(sig)
        body += lines
    ops = [op_class_name(s.name) for s in catalog.SPECS.values()]
    for spec, op, sig in zip(catalog.SPECS.values(), ops, signatures, strict=True):
        body += ["", "", "@irdl_op_definition", f"class {op}({sig}):",
                 f'    name = "vllm.{spec.name}"']

    def imported(module: str, candidates: set[str]) -> list[str]:
        chosen = sorted(candidates & names, key=_isort_key)
        line = f"from {module} import {', '.join(chosen)}"
        if len(line) <= 100:
            return [line] if chosen else []
        return [f"from {module} import (", *(f"    {n}," for n in chosen), ")"]

    interfaces = _public(vllm_interfaces)
    public = interfaces | _public(vllm_families)
    families = sorted({*public, *(names - _GENERATED_ELSEWHERE)} - interfaces, key=_isort_key)
    out = [_HEADER, "from __future__ import annotations", ""]
    if "ClassVar" in names:
        out += ["from typing import ClassVar", ""]
    out += imported("xdsl.dialects.builtin", _BUILTIN)
    out += imported("xdsl.ir", {"Dialect"})
    out += imported("xdsl.irdl", {"irdl_op_definition", "operand_def", "opt_operand_def",
                                  "opt_prop_def", "prop_def", "result_def"})
    out += ["", "from vllm_xdsl.dialects.vllm_families import (",
            *(f"    {n}," for n in families), ")",
            "from vllm_xdsl.dialects.vllm_interfaces import (",
            *(f"    {n}," for n in sorted(interfaces, key=_isort_key)), ")"]
    out += body
    out += ["", "",
            "# The signatures, in the catalog's order (unfused, then fused): the provider",
            "# dialects and auto declare one op of each.",
            "SIGNATURES: tuple[type[SemanticSignature], ...] = (",
            *(f"    {s}," for s in signatures), ")",
            "VLLM_OPS: tuple[type[SemanticSignature], ...] = (",
            *(f"    {o}," for o in ops), ")",
            "# Semantic op name -> vllm op class.",
            "OPS_BY_NAME: dict[str, type[SemanticSignature]] = "
            "{op.SEMANTIC_NAME: op for op in VLLM_OPS}",
            "",
            'Vllm = Dialect("vllm", list(VLLM_OPS), list(ATTRIBUTES))',
            "",
            "__all__ = [",
            *(f'    "{n}",' for n in sorted({*public, *signatures, *ops,
                                            "SIGNATURES", "VLLM_OPS", "OPS_BY_NAME", "Vllm"},
                                           key=_isort_key)),
            "]",
            ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_xdsl.tools.gen_vllm_dialect",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if vllm.py differs from the catalog's")
    args = parser.parse_args(argv)
    try:
        text = render()
    except GenerateError as e:
        print(f"gen_vllm_dialect: error: {e}", file=sys.stderr)
        return 1
    current = TARGET.read_text() if TARGET.exists() else ""
    if args.check:
        if current != text:
            print(f"gen_vllm_dialect: {TARGET} is stale: run python -m "
                  "vllm_xdsl.tools.gen_vllm_dialect", file=sys.stderr)
            return 1
        return 0
    if current != text:
        TARGET.write_text(text)
        print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
