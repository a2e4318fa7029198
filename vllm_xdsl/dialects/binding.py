"""The one binding between a semantic IR op and its native function's arguments, both ways.

Lower-dispatch (argument checks, evaluation, the traced native lowering) and export read an
op's arguments with `native_args`; the importer builds an op from a call's arguments with
`ir_operands` and `ir_properties`. Both directions follow the same rules, driven by the
op's declaration (its parameters in core/catalog.py, in the native's order) and the IRDL
definition of its class:

- a tensor parameter is the operand of the same name (docs/OPS.md names; absent = None);
- `epsilon` is the `epsilon` f64 property, or the `epsilon_value` operand when the graph
  passes it at run time;
- a quant dtype (`quant_dtype`, `fp8_dtype`) is the element type of the result `q`;
- a fused op's scheme parameters are the fields of its `#vllm.quant<...>` scheme, by name;
  `variant` is the variant's keyword text (an unfused quant's `variant` property);
- any other parameter is the property of the same name (UnitAttr, BoolAttr, IntegerAttr,
  FloatAttr or StringAttr, as the op declares it); an absent property is the parameter's
  default, and the importer leaves out a property whose value is the default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from xdsl.dialects.builtin import (
    BoolAttr,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.irdl.constraints import VerificationContext
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.core.catalog import SPECS, Param
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.dialects.types import torch_dtype
from vllm_xdsl.dialects.vllm import NormOp, QuantOp, SemanticSignature
from vllm_xdsl.dialects.vllm_attrs import QuantSchemeAttr, QuantVariantAttr

# Native parameters that are the quant dtype: the element type of the result `q`.
_DTYPE_PARAMETERS = ("quant_dtype", "fp8_dtype")
# The `#vllm.quant<...>` fields a fused native takes as separate parameters (QuantScheme's
# field names; `variant` is its keyword text, the dtype is the result type).
_SCHEME_FIELDS = ("static", "granularity", "group_size", "column_major_scales", "use_ue8m0",
                  "group_eps")


class BindingError(ValueError):
    """An argument the IR cannot hold (e.g. a graph value where a property is needed)."""


# --- IR -> native --------------------------------------------------------------------------


def native_args(op: SemanticSignature, value_of: Callable[[SSAValue], Any]) -> dict[str, Any]:
    """Every native parameter of `op` by name, in the native's order: operands through
    `value_of` (TensorMeta for dispatch, tensors to evaluate, FX nodes to export), the rest
    as Python values read from the op's properties, scheme and result types."""
    scheme = op.quant_scheme() if isinstance(op, QuantOp) else None
    definition = type(op).get_irdl_definition()
    operands = {name for name, _ in definition.operands}
    args: dict[str, Any] = {}
    for p in SPECS[op.SEMANTIC_NAME].params:
        name = p.name
        if name in operands:
            v = getattr(op, name)
            args[name] = None if v is None else value_of(v)
        elif name == "epsilon" and isinstance(op, NormOp):
            eps = op.epsilon_arg()
            args[name] = value_of(eps) if isinstance(eps, SSAValue) else eps
        elif name in _DTYPE_PARAMETERS and isinstance(op, QuantOp):
            args[name] = torch_dtype(op.q.type.element_type)
        elif name == "variant" and scheme is not None:
            args[name] = scheme.variant.spelling()
        elif name in _SCHEME_FIELDS and "scheme" in definition.properties:
            assert scheme is not None
            args[name] = getattr(scheme, name)
        elif name in definition.properties:
            args[name] = _python_value(op.properties.get(name), p)
        else:
            raise AssertionError(f"{op.name}: no IR source for native parameter {name!r}")
    return args


def _python_value(attr: Attribute | None, p: Param) -> Any:
    if attr is None:
        return p.default if p.has_default else None
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, UnitAttr):
        return True
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return bool(value) if p.kind == "bool" else value
    if isinstance(attr, FloatAttr):
        return attr.value.data
    raise AssertionError(f"property {p.name}: no Python value for {attr}")


# --- native -> IR --------------------------------------------------------------------------


def ir_operands(
    op_class: type[IRDLOperation], args: Mapping[str, Any], is_value: Callable[[Any], bool]
) -> dict[str, Any]:
    """The call argument of each operand of `op_class` (None: an absent optional operand);
    a runtime epsilon (a graph value) is the `epsilon_value` operand."""
    found: dict[str, Any] = {}
    for name, _ in op_class.get_irdl_definition().operands:
        if name == "epsilon_value":
            eps = args.get("epsilon")
            found[name] = eps if is_value(eps) else None
        else:
            found[name] = args.get(name)
    return found


def ir_properties(
    op_class: type[SemanticSignature], args: Mapping[str, Any], is_value: Callable[[Any], bool]
) -> dict[str, Attribute]:
    """The properties of the op that a call with these arguments (all bound by name, defaults
    filled in) is; BindingError if an argument the IR holds as a property is a graph value."""
    definition = op_class.get_irdl_definition()
    params = SPECS[op_class.SEMANTIC_NAME].params

    def literal(name: str) -> Any:
        value = args[name]
        if is_value(value):
            kind = next(p.kind for p in params if p.name == name)
            raise BindingError(f"{name} must be a compile-time {kind}")
        return value

    props: dict[str, Attribute] = {}
    has_scheme = "scheme" in definition.properties
    for p in params:
        name = p.name
        if p.kind == "tensor" or name in _DTYPE_PARAMETERS or name not in args:
            continue
        if name == "epsilon":
            if not is_value(args[name]):
                props[name] = FloatAttr(float(args[name]), Float64Type())
        elif has_scheme and (name in _SCHEME_FIELDS or name == "variant"):
            continue  # one #vllm.quant<...> below
        elif name == "variant":
            variant = parse_variant(literal(name))
            if not variant.is_default:
                props[name] = QuantVariantAttr.from_variant(variant)
        elif name in definition.properties:
            value = literal(name)
            if p.has_default and value == p.default:
                continue
            props[name] = _attribute(op_class, p, value)
        else:
            raise AssertionError(f"{op_class.name}: no IR place for native parameter {name!r}")
    if has_scheme:
        props["scheme"] = _scheme_attr(literal)
    return props


def _scheme_attr(literal: Callable[[str], Any]) -> QuantSchemeAttr:
    return QuantSchemeAttr.get(
        static=bool(literal("static")),
        granularity=literal("granularity"),
        group_size=int(literal("group_size")),
        column_major_scales=bool(literal("column_major_scales")),
        use_ue8m0=bool(literal("use_ue8m0")),
        group_eps=float(literal("group_eps")),
        variant=parse_variant(literal("variant")),
    )


def _attribute(op_class: type[IRDLOperation], p: Param, value: Any) -> Attribute:
    """`value` as the attribute the op's property `p.name` is declared to hold."""
    candidates: tuple[Attribute, ...]
    if p.kind == "bool":
        flag = BoolAttr.from_bool(bool(value))
        candidates = (UnitAttr(), flag) if value else (flag,)
    elif p.kind == "int":
        candidates = (IntegerAttr(int(value), IntegerType(64)),)
    elif p.kind == "float":
        candidates = (FloatAttr(float(value), Float64Type()),)
    elif p.kind == "str":
        candidates = (StringAttr(str(value)),)
    else:
        raise AssertionError(f"{op_class.name}: a {p.kind} parameter {p.name} as a property")
    constraint = op_class.get_irdl_definition().properties[p.name].constr
    for attr in candidates:
        try:
            constraint.verify(attr, VerificationContext())
        except VerifyException:
            continue
        return attr
    raise BindingError(f"{p.name} = {value!r} does not fit the property {op_class.name} declares")
