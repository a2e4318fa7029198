"""Import of `torch.ops.vllm_xdsl.<op>` calls as `vllm.<op>` ops.

Torch arguments map by name onto the op's operands and properties (docs/OPS.md names):
a float epsilon becomes the `epsilon` property, an epsilon that is a graph value becomes
the `epsilon_value` operand; a fused op's scheme arguments become one `#vllm.quant<...>`.
A static fused op has no `scales` result in the IR: its torch `scales` output is a float32
copy of the input scale, so uses of it are mapped onto the scale operand itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from xdsl.dialects.builtin import (
    BoolAttr,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    UnitAttr,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import OptOperandDef, OptResultDef

from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.dialects.torch import CallOp, DtypeAttr, OperandRefAttr
from vllm_xdsl.dialects.vllm import OPS_BY_NAME
from vllm_xdsl.dialects.vllm_attrs import QuantSchemeAttr, QuantVariantAttr
from vllm_xdsl.frontend.types import FrontendError, value_type

NAMESPACE = "vllm_xdsl"
_F64 = Float64Type()
_I64 = IntegerType(64)


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


def _literal(args: dict[str, Any], name: str, kind: type, node: torch.fx.Node) -> Any:
    value = args[name]
    if isinstance(value, torch.fx.Node):
        raise FrontendError(f"node {node.name}: {name} must be a compile-time {kind.__name__}")
    return value


def _properties(name: str, args: dict[str, Any], node: torch.fx.Node) -> dict[str, Attribute]:
    props: dict[str, Attribute] = {}
    if "epsilon" in args and not isinstance(args["epsilon"], torch.fx.Node):
        props["epsilon"] = FloatAttr(float(args["epsilon"]), _F64)
    if args.get("variance_size") is not None:
        props["variance_size"] = IntegerAttr(_literal(args, "variance_size", int, node), _I64)
    if "rounded_sum" in args and _literal(args, "rounded_sum", bool, node):
        props["rounded_sum"] = UnitAttr()
    if name == "per_token_group_fp8_quant":
        props["group_size"] = IntegerAttr(_literal(args, "group_size", int, node), _I64)
        if _literal(args, "column_major_scales", bool, node):
            props["column_major_scales"] = BoolAttr.from_bool(True)
        if _literal(args, "use_ue8m0", bool, node):
            props["use_ue8m0"] = BoolAttr.from_bool(True)
        if _literal(args, "eps", float, node) != DEFAULT_GROUP_EPS:
            props["eps"] = FloatAttr(float(args["eps"]), _F64)
    variant = parse_variant(_literal(args, "variant", str, node)) if "variant" in args else None
    if variant is not None and not variant.is_default and "granularity" not in args:
        props["variant"] = QuantVariantAttr.from_variant(variant)
    if "granularity" in args:
        props["scheme"] = QuantSchemeAttr.get(
            static=bool(_literal(args, "static", bool, node)),
            granularity=_literal(args, "granularity", str, node),
            group_size=int(_literal(args, "group_size", int, node)),
            column_major_scales=bool(_literal(args, "column_major_scales", bool, node)),
            use_ue8m0=bool(_literal(args, "use_ue8m0", bool, node)),
            group_eps=float(_literal(args, "group_eps", float, node)),
            variant=parse_variant(_literal(args, "variant", str, node)),
        )
    return props


# Properties _properties builds from the torch arguments itself.
_HANDLED = ("epsilon", "variance_size", "rounded_sum", "group_size", "column_major_scales",
            "use_ue8m0", "eps", "variant", "scheme")


def _scalar_attr(value: Any, node: torch.fx.Node, prop: str) -> Attribute:
    if isinstance(value, float):
        return FloatAttr(value, _F64)
    if isinstance(value, str):
        return StringAttr(value)
    raise FrontendError(f"node {node.name}: property {prop} = {value!r} is not a float or str")


def import_semantic(
    node: torch.fx.Node, value_of: Callable[[torch.fx.Node], SSAValue]
) -> tuple[list[Operation], SSAValue | list[SSAValue]]:
    """The ops for one semantic call and the IR value of each torch output."""
    from vllm_xdsl import ops as semantic_ops

    name = semantic_name(node.target)
    assert name is not None
    cls, outputs = OPS_BY_NAME[name], semantic_ops.ALL_OPS[name].outputs
    args = bind(node)
    if isinstance(args.get("epsilon"), torch.fx.Node):
        args["epsilon_value"] = args["epsilon"]
    definition = cls.get_irdl_definition()
    operands: list[SSAValue | list[SSAValue]] = []
    for operand, odef in definition.operands:
        value = args.get(operand)
        if isinstance(odef, OptOperandDef):
            operands.append([] if value is None else [value_of(value)])
        elif isinstance(value, torch.fx.Node):
            operands.append(value_of(value))
        else:
            raise FrontendError(f"node {node.name}: operand {operand} is {value!r}, not a value")
    props = _properties(name, args, node)
    for prop in definition.properties:
        # A plain scalar property named as the native's parameter (gelu_and_mul_sparse).
        if prop not in props and prop in args and prop not in _HANDLED:
            props[prop] = _scalar_attr(_literal(args, prop, object, node), node, prop)
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
