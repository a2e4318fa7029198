"""When may an in-place kernel overwrite an input? A conservative proof on the IR.

The IR is value-semantic; an in-place kernel writes its result into an input's buffer.
That is safe only if nobody can observe the old value afterwards. We prove it the
simple way and refuse everything else:

- the value's only use is the op being lowered (no later reader, no other alias made
  from it, not returned);
- it is not a block argument (a function argument belongs to the caller);
- it is a fresh tensor: the result of a `vllm` or provider op, or of a `torch.call`
  whose schema says the result aliases no input (a view of another tensor would let
  the write reach that tensor); a module constant (`torch.get_attr`) is never fresh.

Otherwise the lowering copies the input first (`aten::clone`) or uses the out-of-place
variant.
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, Operation, SSAValue

from vllm_xdsl.dialects.torch import CallOp, GetAttrOp, resolve_overload
from vllm_xdsl.transforms.ir.torch_builder import TorchBuilder, meta

_FRESH_DIALECTS = ("vllm.", "triton.", "cuda.", "rocm.", "cpu.")


def not_overwritable(value: SSAValue, user: Operation) -> str | None:
    """None if `user` may overwrite `value` in place; otherwise why not (for the report)."""
    if isinstance(value, BlockArgument):
        return "it is a function argument (the caller still owns it)"
    if not value.has_one_use() or value.get_user_of_unique_use() is not user:
        return "it has another use"
    owner = value.owner
    assert isinstance(owner, Operation)
    if isinstance(owner, GetAttrOp):
        return "it is a module constant"
    if isinstance(owner, CallOp):
        return _call_result_problem(owner, value)
    if owner.name.startswith(_FRESH_DIALECTS):
        return None
    return f"it comes from {owner.name}, not proven to be a fresh tensor"


def _call_result_problem(call: CallOp, value: SSAValue) -> str | None:
    target = call.target.data
    try:
        schema = resolve_overload(target)._schema
    except (AttributeError, RuntimeError):
        return f"it comes from {target}, whose aliasing is unknown"
    results: list[SSAValue] = list(call.results)
    index = results.index(value)
    returns = schema.returns
    if index >= len(returns) or returns[index].alias_info is not None:
        return f"it may alias an input of {target} (a view)"
    return None


def clone(b: TorchBuilder, value: SSAValue) -> SSAValue:
    """A copy the in-place kernel may overwrite instead of `value`."""
    dtype, shape = meta(value)
    copy = b.call("aten::clone.default", value, dtype=dtype, shape=shape)
    if value.name_hint:
        copy.name_hint = f"{value.name_hint}_copy"
    return copy
