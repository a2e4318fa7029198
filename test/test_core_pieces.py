"""Every op has each piece an op is made of, or its catalog spec says that it opts out (and
why): adding an op cannot silently leave one out, and an opt-out cannot outlive the gap.

The pieces (core.catalog.PIECES), beside the native every spec must name:
- triton: a Triton launcher, registered as provider "triton", on a kernel template family;
- raise: a raise form: raise-native's pattern modules build the op (its IR class), or, for
  an act-and-mul member, raising/act_and_mul.py matches its activation (it builds the
  member from the catalog);
- vllm: a vLLM mapping: raising/vllm_forms.py builds the op from a vLLM op (its IR class), or its
  table of forms names the op in the "raised to" column.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_xdsl import ops
from vllm_xdsl.backends.triton.register import register
from vllm_xdsl.backends.triton.spec import template_of
from vllm_xdsl.core import catalog
from vllm_xdsl.dialects.vllm_interfaces import op_class_name
from vllm_xdsl.ops.op import resolve_native

_RAISING = Path(__file__).parent.parent / "vllm_xdsl" / "transforms" / "raising"
# raise-native's modules that read vLLM's own calls, not native decompositions
_VLLM_FORMS = ("vllm_forms.py", "kernel_call.py", "vllm_schemas.py")


def _sources(pattern: str, skip: tuple[str, ...] = ()) -> str:
    files = [p for p in sorted(_RAISING.glob(pattern)) if p.name not in skip]
    assert files, f"no {pattern} under {_RAISING}"
    return "\n".join(p.read_text() for p in files)


def _has_triton(spec: catalog.OpSpec) -> bool:
    register()
    template_of(spec.name)  # raises for an op no template family covers
    return "triton" in ops.ALL_OPS[spec.name].impls()


def _has_raise(spec: catalog.OpSpec) -> bool:
    if f"{op_class_name(spec.name)}" in _sources("*.py", skip=_VLLM_FORMS):
        return True
    return (spec.family == "act_and_mul" and not spec.fused
            and f'"{spec.activation}"' in _sources("act_and_mul.py"))


def _has_vllm(spec: catalog.OpSpec) -> bool:
    source = "\n".join(_sources(name) for name in _VLLM_FORMS)
    raised_to = [row.split("|")[2] for row in source.splitlines()
                 if row.startswith("| ") and row.count("|") >= 4]
    return op_class_name(spec.name) in source or any(
        re.search(rf"\b{spec.name}\b", column) for column in raised_to)


_HAS = {"triton": _has_triton, "raise": _has_raise, "vllm": _has_vllm}


def test_every_piece_has_a_check() -> None:
    assert set(_HAS) == set(catalog.PIECES)


@pytest.mark.parametrize("name", list(catalog.SPECS))
def test_each_op_has_each_piece_or_opts_out(name: str) -> None:
    spec = catalog.SPECS[name]
    assert callable(resolve_native(spec))
    opts_out = dict(spec.opts_out)
    assert all(why.strip() for why in opts_out.values()), "an opt-out says why"
    for piece in catalog.PIECES:
        has = _HAS[piece](spec)
        if piece in opts_out:
            assert not has, f"{name} opts out of {piece!r} but has it: drop the opt-out"
        else:
            assert has, f"{name} has no {piece!r} piece: add it, or opt out in the catalog"


def test_an_unknown_opt_out_is_a_catalog_problem() -> None:
    import dataclasses

    odd = dataclasses.replace(catalog.RMS_NORM, opts_out=(("cuda", "no"),))  # type: ignore[arg-type]
    assert odd.problem() is not None and "unknown piece" in odd.problem()
