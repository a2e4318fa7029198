"""The `torch` dialect: opaque calls of torch op overloads the compiler does not know.

An op the compiler has no semantic op for is kept as it was in the FX graph, so it runs
exactly as before:

    %s = torch.call "aten::add.Tensor"(%a, %b) [#torch.operand<0>, #torch.operand<1>]
           kwargs {alpha = 1 : i64} : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>

- `target` is the overload's qualified name (`namespace::op.overload`); one that torch does
  not know (`aten::mull.Tensor`) does not verify. A namespace with no op loaded in this
  process (another library's) is not checked, nor `python::` targets.
- Tensor and symbolic-scalar arguments are SSA operands; `args` is the positional argument
  list in which `#torch.operand<i>` stands for operand i and every other entry is a
  literal: integers, floats, `true`/`false`, strings, `#torch.none`, dtypes
  (`#torch.dtype<bf16>`), devices and enums (`#torch.device<"cpu">`, `#torch.enum<"...">`)
  and (nested) lists.
- `kwargs` holds keyword arguments the same way.
- Results: one per tensor or scalar the op returns (a tuple return gives several).

Values the compiler cannot look into (a torchbind script object, an object of a type
registered with `torch._library.opaque_object.register_opaque_type`, such as the attention
layer name vLLM passes into its graphs) have the type `!torch.opaque<"class.name">`: they
are function arguments and call operands like any other value, and only calls read them.

`torch.get_attr` stands for a module constant (an FX `get_attr` node).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import EffectInstance, MemoryEffect
from xdsl.utils.exceptions import VerifyException


@irdl_attr_definition
class OperandRefAttr(ParametrizedAttribute):
    """`#torch.operand<i>`: in an argument list, the op's i-th SSA operand."""

    name = "torch.operand"
    index: IntAttr

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.index.data}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            return [IntAttr(parser.parse_integer(allow_negative=False))]


@irdl_attr_definition
class NoneAttr(ParametrizedAttribute):
    """`#torch.none`: Python's None as an argument."""

    name = "torch.none"


@irdl_attr_definition
class DtypeAttr(ParametrizedAttribute):
    """`#torch.dtype<bf16>`: a torch.dtype argument, spelled as its element type."""

    name = "torch.dtype"
    element_type: Attribute

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.element_type)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            return [parser.parse_type()]


class _QuotedNameAttr(ParametrizedAttribute):
    """An attribute or type whose one parameter is a name, printed `<"name">`."""

    def print_parameters(self, printer: Printer) -> None:
        (name,) = self.parameters
        assert isinstance(name, StringAttr)
        with printer.in_angle_brackets():
            printer.print_string_literal(name.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            return [StringAttr(parser.parse_str_literal())]


class _NamedValueAttr(_QuotedNameAttr):
    """An argument value that torch spells by name (a device, an enum member)."""

    value: StringAttr


@irdl_attr_definition
class DeviceAttr(_NamedValueAttr):
    """`#torch.device<"cuda:0">`."""

    name = "torch.device"


@irdl_attr_definition
class EnumAttr(_NamedValueAttr):
    """`#torch.enum<"torch.contiguous_format">`: layouts, memory formats and the like."""

    name = "torch.enum"


@irdl_attr_definition
class NoneType(ParametrizedAttribute, TypeAttribute):
    """`!torch.none`: the type of a result that is always None."""

    name = "torch.none_type"


class TorchCallEffects(MemoryEffect):
    """A call's effects as its overload declares them: none for a known, functional,
    deterministic op (`is_side_effect_free`), else unknown. So xDSL's dead code elimination
    (`dce`, and the dead-op removal of every greedy pattern walk) deletes an unused call
    exactly when it may."""

    @classmethod
    def get_effects(cls, op: Operation) -> AbstractSet[EffectInstance] | None:
        return frozenset() if isinstance(op, CallOp) and is_side_effect_free(op) else None


@irdl_attr_definition
class OpaqueType(_QuotedNameAttr, TypeAttribute):
    """`!torch.opaque<"__torch__.torch.classes.ns.Cls">`: an object only torch ops read.

    The parameter is the class name torch knows the object by: a script class's
    qualified name, or the name an opaque type was registered under (`module.Class`)."""

    name = "torch.opaque"
    class_name: StringAttr


@irdl_op_definition
class CallOp(IRDLOperation):
    """A call of a torch op overload, kept opaque."""

    name = "torch.call"
    traits = traits_def(TorchCallEffects())

    target = prop_def(StringAttr)
    args = prop_def(ArrayAttr)
    kwargs = opt_prop_def(DictionaryAttr)
    inputs = var_operand_def()
    outputs = var_result_def()

    assembly_format = (
        "$target `(` $inputs `)` $args (`kwargs` $kwargs^)? attr-dict "
        "`:` functional-type($inputs, $outputs)"
    )

    def __init__(
        self,
        target: str,
        inputs: list,
        args: list[Attribute],
        result_types: list[Attribute],
        kwargs: dict[str, Attribute] | None = None,
    ) -> None:
        props: dict[str, Attribute] = {"target": StringAttr(target), "args": ArrayAttr(args)}
        if kwargs:
            props["kwargs"] = DictionaryAttr(kwargs)
        # What IRDL's generic builder would build, without it (a third of the cost of an op,
        # and the importer creates one per FX node): one variadic operand and result list,
        # no segment sizes or defaults to fill in.
        Operation.__init__(self, operands=[SSAValue.get(v) for v in inputs],
                           result_types=result_types, properties=props)

    def verify_(self) -> None:
        if "::" not in self.target.data:
            raise VerifyException(
                f"target must be a qualified overload name like 'aten::add.Tensor', "
                f"got {self.target.data!r}"
            )
        unknown = unknown_target(self.target.data)
        if unknown is not None:
            raise VerifyException(unknown)
        count = len(self.operands)  # = inputs, without IRDL's variadic bookkeeping
        used: set[int] = set()
        for attr in _walk(self.args, self.kwargs):
            if isinstance(attr, OperandRefAttr):
                if attr.index.data >= count:
                    raise VerifyException(
                        f"#torch.operand<{attr.index.data}> refers past the "
                        f"{count} operands of {self.target.data}"
                    )
                used.add(attr.index.data)
        unused = set(range(count)) - used
        if unused:
            raise VerifyException(
                f"operands {sorted(unused)} of {self.target.data} are not used by args or kwargs"
            )


# Discardable attribute of a `torch.get_attr` of a 0-d float constant: its value (f64).
CONSTANT_VALUE = "torch.value"


@irdl_op_definition
class GetAttrOp(IRDLOperation):
    """A module constant (parameter or buffer) by its qualified name."""

    name = "torch.get_attr"

    attr_name = prop_def(StringAttr)
    result = result_def()

    assembly_format = "$attr_name attr-dict `:` type($result)"


def resolve_overload(target: str):  # noqa: ANN201
    """The torch OpOverload named by a `torch.call` target, e.g. 'aten::add.Tensor'."""
    import torch

    namespace, _, rest = target.partition("::")
    op_name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace), op_name)
    return getattr(packet, overload or "default")


# Targets that verified: the verifier runs after every pass on every call, so each name is
# resolved once. Failures are not remembered (an op may be registered later).
_known_targets: set[str] = set()
_UNCHECKED_NAMESPACES = ("python",)  # resolving those would import modules


def unknown_target(target: str) -> str | None:
    """Why torch has no op `target` ('aten::mull.Tensor'), or None if it has or cannot tell.

    A namespace with no op registered in this process (a library that is not loaded, such
    as vLLM's `_C` in a dump read elsewhere) is accepted: the call stays opaque."""
    if target in _known_targets:
        return None
    namespace, _, rest = target.partition("::")
    if namespace == "higher_order":
        import torch

        if not hasattr(torch.ops.higher_order, rest):
            return f"unknown torch op {target!r}: torch has no higher-order op {rest!r}"
    elif namespace not in _UNCHECKED_NAMESPACES:
        try:
            resolve_overload(target)
        except (AttributeError, RuntimeError):
            if namespace in _loaded_namespaces():
                return _why_unknown(target, namespace, rest)
    _known_targets.add(target)
    return None


def _why_unknown(target: str, namespace: str, rest: str) -> str:
    import torch

    op_name, _, overload = rest.partition(".")
    try:
        getattr(getattr(torch.ops, namespace), op_name)
    except (AttributeError, RuntimeError):
        return f"unknown torch op {target!r}: torch has no op {namespace}::{op_name}"
    return f"unknown torch op {target!r}: {namespace}::{op_name} has no overload {overload or 'default'!r}"


def _loaded_namespaces() -> set[str]:
    import torch

    return {name.partition("::")[0] for name in torch._C._dispatch_get_all_op_names()}


# Per target that resolved, whether it is side-effect free (dead-op removal asks for every
# unused call). An unresolved target is not remembered: it may be registered later.
_free_targets: dict[str, bool] = {}


def is_side_effect_free(op: CallOp) -> bool:
    """Whether an unused `torch.call` may be deleted: a known, functional, deterministic op.

    Unknown overloads, mutating ops, collectives and random ops are kept.
    """
    target = op.target.data
    free = _free_targets.get(target)
    if free is not None:
        return free
    import torch

    try:
        overload = resolve_overload(target)
    except (AttributeError, RuntimeError):
        return False
    schema = overload._schema
    free = (not (schema.is_mutable or torch.Tag.nondeterministic_seeded in overload.tags)
            and overload.namespace in ("aten", "prims", "vllm_xdsl"))
    _free_targets[target] = free
    return free


def _walk(*attrs: Attribute | None):  # noqa: ANN202
    """Every attribute nested in lists and dictionaries."""
    for attr in attrs:
        if attr is None:
            continue
        if isinstance(attr, ArrayAttr):
            yield from _walk(*attr.data)
        elif isinstance(attr, DictionaryAttr):
            yield from _walk(*attr.data.values())
        else:
            yield attr


Torch = Dialect(
    "torch",
    [CallOp, GetAttrOp],
    [OperandRefAttr, NoneAttr, DtypeAttr, DeviceAttr, EnumAttr, NoneType, OpaqueType],
)
