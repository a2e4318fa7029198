"""Building an IRDL op from its operands and result types by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, OptOperandDef, OptResultDef

_Op = TypeVar("_Op", bound=IRDLOperation)


def build_op(
    cls: type[_Op],
    operands: Mapping[str, SSAValue | None],
    result_types: Mapping[str, Attribute | None],
    properties: Mapping[str, Attribute],
) -> _Op:
    """Build `cls` from operands and result types by name (absent optional ones: None),
    in the order of its IRDL definition, so callers need not know segment layouts."""
    definition = cls.get_irdl_definition()
    ops_args: list[SSAValue | list[SSAValue]] = []
    for name, odef in definition.operands:
        v = operands.get(name)
        if isinstance(odef, OptOperandDef):
            ops_args.append([] if v is None else [v])
        else:
            assert v is not None, f"{cls.name}: operand {name} is required"
            ops_args.append(v)
    res_args: list[Attribute | list[Attribute]] = []
    for name, rdef in definition.results:
        t = result_types.get(name)
        if isinstance(rdef, OptResultDef):
            res_args.append([] if t is None else [t])
        else:
            assert t is not None, f"{cls.name}: result {name} is required"
            res_args.append(t)
    return cls.build(operands=ops_args, result_types=res_args, properties=dict(properties))
