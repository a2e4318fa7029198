"""Building an IRDL op from its operands and result types by name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, OptOperandDef, OptResultDef

_Op = TypeVar("_Op", bound=IRDLOperation)
_T = TypeVar("_T")


def build_op(
    cls: type[_Op],
    operands: Mapping[str, SSAValue | None],
    result_types: Mapping[str, Attribute | None],
    properties: Mapping[str, Attribute],
) -> _Op:
    """Build `cls` from operands and result types by name (absent optional ones: None),
    in the order of its IRDL definition, so callers need not know segment layouts."""
    definition = cls.get_irdl_definition()
    ops_args = _segments(cls, "operand", definition.operands, operands, OptOperandDef)
    res_args = _segments(cls, "result", definition.results, result_types, OptResultDef)
    return cls.build(operands=ops_args, result_types=res_args, properties=dict(properties))


def _segments(
    cls: type[IRDLOperation],
    what: str,
    definitions: Sequence[tuple[str, object]],
    given: Mapping[str, _T | None],
    optional: type,
) -> list[_T | list[_T]]:
    """`given` in the order of `definitions`: an optional one as a 0- or 1-element list,
    a required one as itself."""
    args: list[_T | list[_T]] = []
    for name, definition in definitions:
        v = given.get(name)
        if isinstance(definition, optional):
            args.append([] if v is None else [v])
        else:
            assert v is not None, f"{cls.name}: {what} {name} is required"
            args.append(v)
    return args
