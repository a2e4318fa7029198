"""vLLM's kernel calls as vllm_forms.py reads them: one `torch.call` of a vLLM op, plain
or functionalized (`auto_functionalized` in vLLM's post-grad graph, `auto_functionalized_v2`
where AOTAutograd functionalizes a `_C` call that writes into a `torch.empty` buffer),
seen as its arguments by schema name and, for each argument the kernel writes, the value
holding its new contents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.ir import SSAValue

from vllm_xdsl.dialects.torch import CallOp, EnumAttr
from vllm_xdsl.transforms.raising import match as m
from vllm_xdsl.transforms.raising import vllm_schemas as schemas

AUTO_V1 = "higher_order::auto_functionalized"
AUTO_V2 = "higher_order::auto_functionalized_v2"
_OVERLOAD_PREFIX = "torch.ops."


@dataclass(frozen=True)
class KernelCall:
    """A vLLM op call: `name` a key of vllm_schemas.SCHEMAS."""

    op: CallOp
    name: str
    args: dict[str, Any]
    """Schema argument name -> SSA value or Python literal (defaults filled in)."""
    returned: Sequence[SSAValue]
    """The op's own results (a None placeholder for an op returning nothing)."""
    written: dict[str, SSAValue]
    """Written argument -> the value of its contents after the call (functionalized)."""


def _name_of_overload(attr: Any) -> str | None:
    """`#torch.enum<"torch.ops._C.rms_norm.default">` -> `_C::rms_norm`."""
    if not isinstance(attr, EnumAttr) or not attr.value.data.startswith(_OVERLOAD_PREFIX):
        return None
    namespace, _, rest = attr.value.data.removeprefix(_OVERLOAD_PREFIX).partition(".")
    return schemas.qualified(f"{namespace}::{rest}")


def read_call(op: CallOp) -> KernelCall | None:
    """The call `op` makes, if it is a vLLM op of SCHEMAS (None otherwise, or when a
    functionalized argument is a slice or strided view of its base: its new contents are
    not a value; a view with the base's whole layout is read as the base).
    Arguments are named as in SCHEMAS, whatever the schema the graph was traced with calls
    them (vllm_schemas.spelling)."""
    target = op.target.data
    if target in (AUTO_V1, AUTO_V2):
        if len(op.args.data) != 1 or (name := _name_of_overload(op.args.data[0])) is None:
            return None
        if name not in schemas.SCHEMAS or (sp := schemas.spelling(name)) is None:
            return None
        kw = {k: m.arg(op, 99, k) for k in m.kwarg_names(op)}
        n_out = max(schemas.return_count(name), 1)
        returned, rest = list(op.results[:n_out]), list(op.results[n_out:])
        written: dict[str, SSAValue] = {}
        if target == AUTO_V1:
            names = sp.written()
            if len(rest) != len(names):
                return None
            written = dict(zip(names, rest, strict=True))
        else:
            bases = kw.pop("_all_bases", None)
            if not isinstance(bases, list) or len(rest) != len(bases):
                return None
            for arg_name in sp.written():
                if any(f"_{arg_name}_{k}" in kw for k in VIEW_KEYS):
                    return None
                # `_x_alias`: x is a view of its base with the base's size, stride and
                # offset (torch 2.13 records it so; its AliasViewInfo regenerates it as
                # `aten.alias(base)`), so it holds the base's contents, before the call and
                # after. vLLM's engine passes such views (a linear's output read back
                # through a view of its `torch.empty` buffer).
                if kw.pop(f"_{arg_name}_alias", True) is not True:
                    return None
                index = kw.pop(f"_{arg_name}_base_index", None)
                if index is None:
                    kw[arg_name] = None
                    continue
                kw[arg_name] = bases[index]
                written[arg_name] = rest[index]
        args = _bind(sp, kw)
        if args is None:
            return None
        written = {sp.canonical[k]: v for k, v in written.items()}
        return KernelCall(op, name, args, returned, written)
    name = schemas.qualified(target)
    if name not in schemas.SCHEMAS or (sp := schemas.spelling(name)) is None or sp.written():
        return None  # an op that writes must reach here functionalized
    kw = {k: m.arg(op, i, k) for i, k in enumerate(sp.names())}
    kw = {k: v for k, v in kw.items() if v is not m.MISSING}
    args = _bind(sp, kw)
    return None if args is None else KernelCall(op, name, args, list(op.results), {})


VIEW_KEYS = ("size", "stride", "storage_offset", "slice_dim", "slice_start", "slice_end")
"""auto_functionalized_v2's keywords of an argument written through a slice or strided view
of its base."""


def _bind(sp: schemas.Spelling, given: dict[str, Any]) -> dict[str, Any] | None:
    """The call's arguments by SCHEMAS' names, defaults filled in; None where the call
    names an argument the schema lacks or omits one without a default."""
    names = sp.names()
    if set(given) - set(names):
        return None
    args = {**sp.defaults(), **given}
    if set(args) != set(names):
        return None
    return {sp.canonical[k]: v for k, v in args.items()}
