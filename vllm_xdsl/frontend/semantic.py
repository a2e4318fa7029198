"""Import of `torch.ops.vllm_xdsl.<op>` calls as `vllm.<op>` ops.

Torch arguments map by name onto the op's operands and properties (docs/OPS.md names)
through the one IR <-> native binding (dialects/binding.py): a float epsilon becomes the
`epsilon` property, an epsilon that is a graph value becomes the `epsilon_value` operand; a
fused op's scheme arguments become one `#vllm.quant<...>`.
A static fused op has no `scales` result in the IR: its torch `scales` output is a float32
copy of the input scale, so uses of it are mapped onto the scale operand itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from xdsl.dialects.builtin import Float32Type, IntAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import OptOperandDef, OptResultDef

from vllm_xdsl.dialects.binding import BindingError, ir_operands, ir_properties
from vllm_xdsl.dialects.torch import CallOp, DtypeAttr, OperandRefAttr
from vllm_xdsl.dialects.vllm import OPS_BY_NAME
from vllm_xdsl.frontend.types import FrontendError, value_type

NAMESPACE = "vllm_xdsl"


def semantic_name(target: Any) -> str | None:
    """The semantic op a call target is, or None."""
    if isinstance(target, torch._ops.OpOverload) and target.namespace == NAMESPACE:
        name = target._schema.name.split("::", 1)[1]
        return name if name in OPS_BY_NAME else None
    return None


def is_semantic(target: Any) -> bool:
    return semantic_name(target) is not None


def bind(node: torch.fx.Node) -> dict[str, Any]:
    """Every schema argument of the call by name, defaults filled in."""
    target = node.target
    assert isinstance(target, torch._ops.OpOverload), f"{node}: not a semantic op call"
    schema = target._schema
    bound: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            bound[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            bound[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
        else:
            raise FrontendError(f"node {node.name}: missing argument {arg.name}")
    return bound


def _is_value(arg: Any) -> bool:
    return isinstance(arg, torch.fx.Node)


def import_semantic(
    node: torch.fx.Node, value_of: Callable[[torch.fx.Node], SSAValue]
) -> tuple[list[Operation], SSAValue | list[SSAValue]]:
    """The ops for one semantic call and the IR value of each torch output."""
    from vllm_xdsl import ops as semantic_ops

    name = semantic_name(node.target)
    assert name is not None
    cls, outputs = OPS_BY_NAME[name], semantic_ops.ALL_OPS[name].outputs
    args = bind(node)
    definition = cls.get_irdl_definition()
    operands: list[SSAValue | list[SSAValue]] = []
    arguments = ir_operands(cls, args, _is_value)
    for operand, odef in definition.operands:
        value = arguments[operand]
        if isinstance(odef, OptOperandDef):
            operands.append([] if value is None else [value_of(value)])
        elif isinstance(value, torch.fx.Node):
            operands.append(value_of(value))
        else:
            raise FrontendError(f"node {node.name}: operand {operand} is {value!r}, not a value")
    try:
        props = ir_properties(cls, args, _is_value)
    except BindingError as e:
        raise FrontendError(f"node {node.name}: {e}") from None
    val = node.meta.get("val")
    vals = val if isinstance(val, (tuple, list)) else (val,)
    static = bool(args.get("static", False))
    result_types: list[Attribute | list[Attribute]] = []
    for result, rdef in definition.results:
        t = value_type(vals[outputs.index(result)], f"node {node.name} result {result}")
        if isinstance(rdef, OptResultDef):
            result_types.append([] if static else [t])
        else:
            result_types.append(t)
    op = cls.build(operands=operands, result_types=result_types, properties=props)
    op.verify()
    new_ops: list[Operation] = [op]
    values: list[SSAValue] = []
    for out in outputs:
        if out == "scales" and static:
            values.append(_static_scales(args["scale"], value_of, new_ops))
        else:
            values.append(getattr(op, out))
    base = re.sub(r"(_\d+)+$", "", node.name)  # the printer numbers duplicates itself
    for v, out in zip(values, outputs, strict=True):
        name = f"{base}_{out}" if len(outputs) > 1 else base
        if v.owner is op and SSAValue.is_valid_name(name):
            v.name_hint = name
    return new_ops, values if len(outputs) > 1 else values[0]


def _static_scales(
    scale: torch.fx.Node, value_of: Callable[[torch.fx.Node], SSAValue], new_ops: list[Operation]
) -> SSAValue:
    """The torch `scales` output of a static fused op: the input scale as float32 [1]."""
    v = value_of(scale)
    f32_1 = TensorType(Float32Type(), [1])
    if v.type == f32_1:
        return v
    cast = CallOp(
        "aten::_to_copy.default", [v], [OperandRefAttr(IntAttr(0))], [f32_1], {"dtype": DtypeAttr(Float32Type())}
    )
    new_ops.append(cast)
    return cast.results[0]
