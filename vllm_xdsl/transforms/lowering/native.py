"""The native provider's lowering, traced from the native function itself.

A semantic op's native (vllm_xdsl/ops: the contract) is traced with `make_fx` on meta
tensors of the op's operand types, and the traced aten graph becomes `torch.call` ops. So
the lowering computes exactly what the contract computes, and a new op or variant needs
no lowering of its own: its native is its lowering.

Unknown (`?`) dims are traced twice with different sizes (the token dims 13 and 17, the
last dim 40320 and 80640, both divisible by every group size in use). The two traces must
be the same graph: a literal that differs between them is a size, and is accepted only
where it can be spelled without the size (one entry of a view's shape: `-1`); anything
else is a native that bakes in a dynamic size, and the op is left to the native's torch op
(`NativeNotTraceable`). A runtime epsilon (an f64 scalar operand) is traced as two
distinct floats and becomes that operand wherever its value shows up.

Spelling: a cast (`_to_copy` with only a dtype) is `prims.convert_element_type`, as
Inductor expects; everything else is the aten op the native dispatched. Each distinct
(op, properties, operand types) is traced once per process.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from vllm_xdsl.dialects.binding import native_args
from vllm_xdsl.dialects.types import static_shape, tensor_type, torch_dtype
from vllm_xdsl.dialects.vllm import SemanticSignature
from vllm_xdsl.ops import ALL_OPS
from vllm_xdsl.transforms.ir.torch_builder import Enum, TorchBuilder

# Sizes given to `?` dims in the two traces: (token dims, last dim).
_SIZES = ((13, 40320), (17, 80640))
_EPSILONS = (1.25e-7, 1.75e-7)  # a runtime epsilon, traced as a float


class NativeNotTraceable(Exception):
    """The native cannot be lowered for these operand types (its message says why)."""


# --- the recipe: a traced native with its dynamic literals resolved ------------------------


@dataclass(frozen=True)
class _Input:
    index: int  # position among the op's operands that the native reads


@dataclass(frozen=True)
class _Value:
    step: int  # index of the producing step
    result: int  # which of its results


@dataclass(frozen=True)
class _Step:
    target: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    results: tuple[Attribute, ...]


@dataclass(frozen=True)
class _Recipe:
    steps: tuple[_Step, ...]
    outputs: dict[int, Any]  # _Input | _Value by the native's result index, those the op has


_EPSILON = object()  # marks where the runtime epsilon operand goes


def _placeholder_tensor(t: Attribute, run: int) -> torch.Tensor | float:
    if not isinstance(t, TensorType):
        return _EPSILONS[run]  # an f64 scalar: the runtime epsilon
    shape = static_shape(t)
    tokens, last = _SIZES[run]
    dims = [d if d is not None else (last if i == len(shape) - 1 else tokens)
            for i, d in enumerate(shape)]
    return torch.empty(dims, dtype=torch_dtype(t.element_type), device="meta")


def _trace(op: Operation, run: int) -> tuple[torch.fx.Graph, list[SSAValue], bool]:
    """The native of `op` traced on placeholders; the operands in placeholder order, and
    whether a scalar epsilon operand is among the native's arguments."""
    assert isinstance(op, SemanticSignature)
    semantic = ALL_OPS[op.SEMANTIC_NAME]
    operands: list[SSAValue] = []
    tensors: list[torch.Tensor] = []
    scalar_eps = False

    def value_of(v: SSAValue) -> Any:
        nonlocal scalar_eps
        p = _placeholder_tensor(v.type, run)
        if isinstance(p, float):
            scalar_eps = True
            return p
        operands.append(v)
        tensors.append(p)
        return p

    kwargs = native_args(op, value_of)
    slots = {id(t): i for i, t in enumerate(tensors)}
    names = list(kwargs)

    def call(*flat: torch.Tensor) -> Any:
        bound = {n: (flat[slots[id(v)]] if id(v) in slots else v)
                 for n, v in zip(names, kwargs.values(), strict=True)}
        return semantic.native(**bound)

    try:
        gm = make_fx(call)(*tensors)
    except Exception as e:  # a native that does not run on meta tensors
        raise NativeNotTraceable(f"{op.name}: tracing its native failed: {e}") from None
    return gm.graph, operands, scalar_eps


def _vals(node: torch.fx.Node) -> list[Any]:
    val = node.meta.get("val")
    return list(val) if isinstance(val, list | tuple) else [val]


def _result_type(a: Any, b: Any) -> Attribute:
    if not isinstance(a, torch.Tensor):
        raise NativeNotTraceable(f"non-tensor result {a!r}")
    shape = tuple(x if x == y else None for x, y in zip(a.shape, b.shape, strict=True))
    return tensor_type(a.dtype, shape)


def _merge_literal(a: Any, b: Any, where: str) -> Any:
    """One literal of both traces, or NativeNotTraceable when they differ in a way that
    only a dynamic size explains."""
    if isinstance(a, float) and (a, b) == _EPSILONS:
        return _EPSILON
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        return [_merge_literal(x, y, where) for x, y in zip(a, b, strict=True)]
    if type(a) is not type(b) or a != b:
        raise NativeNotTraceable(f"{where}: a literal depends on a dynamic size ({a} vs {b})")
    if isinstance(a, torch.device):
        raise NativeNotTraceable(f"{where}: the native names a device")
    if isinstance(a, torch.memory_format):
        return Enum(str(a))
    return a


_VIEWS = {"aten::view.default", "aten::reshape.default", "aten::_unsafe_view.default"}


def _view(a: torch.fx.Node, b: torch.fx.Node, where: str) -> tuple[str, tuple, tuple]:
    """A view whose shape holds a dynamic size, spelled without it: one unknown entry as
    -1, else the split of one dim (unflatten) or the merge of several (flatten)."""
    source_a, source_b = a.args[0], b.args[0]
    assert isinstance(source_a, torch.fx.Node) and isinstance(source_b, torch.fx.Node)
    in_a, in_b = list(_vals(source_a)[0].shape), list(_vals(source_b)[0].shape)
    out_a, out_b = list(_vals(a)[0].shape), list(_vals(b)[0].shape)
    dynamic = [i for i, (x, y) in enumerate(zip(out_a, out_b, strict=True)) if x != y]
    if len(dynamic) == 1:
        shape = [-1 if i in dynamic else d for i, d in enumerate(out_a)]
        return "aten::view.default", (source_a, shape), (source_b, shape)
    p = 0  # the dims both shapes share in front, and at the back
    while (p < min(len(in_a), len(out_a)) and in_a[p] == out_a[p] and in_b[p] == out_b[p]):
        p += 1
    s = 0
    while (s < min(len(in_a), len(out_a)) - p and in_a[-1 - s] == out_a[-1 - s]
           and in_b[-1 - s] == out_b[-1 - s]):
        s += 1
    mid_in, mid_out = len(in_a) - p - s, len(out_a) - p - s
    if mid_in == 1 and mid_out >= 2:
        sizes = [-1 if x != y else x
                 for x, y in zip(out_a[p:p + mid_out], out_b[p:p + mid_out], strict=True)]
        if sizes.count(-1) <= 1:
            return "aten::unflatten.int", (source_a, p, sizes), (source_b, p, sizes)
    if mid_out == 1 and mid_in >= 2:
        end = p + mid_in - 1
        return "aten::flatten.using_ints", (source_a, p, end), (source_b, p, end)
    raise NativeNotTraceable(f"{where}: a view's shape depends on several dynamic sizes")


def _target(node: torch.fx.Node) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """The op's schema name as `torch.call` spells it, and its args."""
    target = node.target
    args, kwargs = tuple(node.args), dict(node.kwargs)
    if target is torch.ops.aten._to_copy.default and set(kwargs) == {"dtype"}:
        return "prims::convert_element_type.default", (args[0], kwargs["dtype"]), {}
    if not isinstance(target, torch._ops.OpOverload):
        raise NativeNotTraceable(f"the native calls {target}, not an aten op")
    return target._schema.name + "." + (target._overloadname or "default"), args, kwargs


def _recipe(op: Operation) -> tuple[_Recipe, list[int]]:
    """The recipe of `op`'s native, and the operand indices its placeholders stand for."""
    graph_a, operands, _ = _trace(op, 0)
    graph_b, _, _ = _trace(op, 1)
    nodes_a, nodes_b = list(graph_a.nodes), list(graph_b.nodes)
    if [n.target for n in nodes_a] != [n.target for n in nodes_b]:
        raise NativeNotTraceable(f"{op.name}: its native's graph depends on a dynamic size")
    where: dict[torch.fx.Node, Any] = {}
    steps: list[_Step] = []
    inputs = 0
    outputs: tuple[Any, ...] = ()

    def ref(a: Any, b: Any, name: str) -> Any:
        if isinstance(a, torch.fx.Node):
            return where[a]
        if isinstance(a, list | tuple) and any(isinstance(x, torch.fx.Node) for x in a):
            return [ref(x, y, name) for x, y in zip(a, b, strict=True)]
        return _merge_literal(a, b, name)

    for a, b in zip(nodes_a, nodes_b, strict=True):
        if a.op == "placeholder":
            where[a] = _Input(inputs)
            inputs += 1
        elif a.op == "output":
            (out_a,), (out_b,) = a.args, b.args
            seq_a = out_a if isinstance(out_a, list | tuple) else [out_a]
            seq_b = out_b if isinstance(out_b, list | tuple) else [out_b]
            outputs = tuple(ref(x, y, "output") for x, y in zip(seq_a, seq_b, strict=True))
        elif a.op == "call_function" and a.target is operator.getitem:
            source, index = a.args
            assert isinstance(source, torch.fx.Node)
            producer = where[source]
            where[a] = _Value(producer.step, int(index))
        elif a.op == "call_function" and _is_identity_view(a, b):
            source = a.args[0]
            assert isinstance(source, torch.fx.Node)
            where[a] = where[source]
        elif a.op == "call_function":
            target, args_a, kwargs_a = _target(a)
            _, args_b, kwargs_b = _target(b)
            name = f"{op.name}: {target}"
            results = tuple(_result_type(x, y) for x, y in zip(_vals(a), _vals(b), strict=True))
            if target in _VIEWS and args_a[1] != args_b[1]:
                target, args_a, args_b = _view(a, b, name)
                kwargs_a = kwargs_b = {}
            args = tuple(ref(x, y, name) for x, y in zip(args_a, args_b, strict=True))
            kwargs = tuple((k, ref(v, kwargs_b[k], name)) for k, v in kwargs_a.items())
            where[a] = _Value(len(steps), 0)
            steps.append(_Step(target, args, kwargs, results))
        else:
            raise NativeNotTraceable(f"{op.name}: its native reads {a.op} {a.target}")
    used = {i: outputs[i] for i in _result_indices(op)}
    return _prune(steps, used), [op.operands.index(v) for v in operands]


def _is_identity_view(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    """A view to its source's own shape in both traces (a native's `.view(x.shape)` at
    the end): the source itself, in a graph where nothing is mutated."""
    if a.target not in (torch.ops.aten.view.default, torch.ops.aten.reshape.default,
                        torch.ops.aten._unsafe_view.default):
        return False
    return all(isinstance(n.args[0], torch.fx.Node)
               and _vals(n)[0].shape == _vals(n.args[0])[0].shape for n in (a, b))


def _renumbered(r: Any, steps: dict[int, int]) -> Any:
    """`r` (an argument or output) with each step it reads renumbered by `steps`."""
    if isinstance(r, _Value):
        return _Value(steps[r.step], r.result)
    if isinstance(r, list):
        return [_renumbered(x, steps) for x in r]
    return r


def _step_renumbered(step: _Step, steps: dict[int, int]) -> _Step:
    return _Step(step.target, tuple(_renumbered(a, steps) for a in step.args),
                 tuple((k, _renumbered(v, steps)) for k, v in step.kwargs), step.results)


def _prune(steps: list[_Step], used: dict[int, Any]) -> _Recipe:
    """The recipe computing only the native results the IR op has (`used`, by the
    native's result index): a repeated step computed once, a step nothing reads dropped
    (a static quant's native returns a copy of its scale, which its IR op does not)."""
    # One step per distinct (target, arguments): every step is a functional aten op.
    same: dict[int, int] = {}
    first: dict[str, int] = {}
    for i, step in enumerate(steps):
        steps[i] = step = _step_renumbered(step, same)
        same[i] = first.setdefault(repr((step.target, step.args, step.kwargs)), i)
    outputs = {i: _renumbered(r, same) for i, r in used.items()}

    live: set[int] = set()

    def mark(r: Any) -> None:
        if isinstance(r, _Value) and r.step not in live:
            live.add(r.step)
            for a in (*steps[r.step].args, *(v for _, v in steps[r.step].kwargs)):
                mark(a)
        elif isinstance(r, list):
            for x in r:
                mark(x)

    for r in outputs.values():
        mark(r)
    order = sorted(live)
    kept = {old: new for new, old in enumerate(order)}
    return _Recipe(tuple(_step_renumbered(steps[i], kept) for i in order),
                   {i: _renumbered(r, kept) for i, r in outputs.items()})


def _key(op: Operation) -> tuple[Any, ...]:
    """What a recipe depends on; attributes compare as values (printing them would put
    IR text on the compile path)."""
    return (op.name, tuple(sorted(op.properties.items(), key=lambda kv: kv[0])),
            tuple(v.type for v in op.operands), tuple(r.type for r in op.results),
            tuple(_result_indices(op)))


# Recipes by _key: a model repeats the same few ops (one per layer) with the same types.
_RECIPES: dict[tuple[Any, ...], tuple[_Recipe, list[int]] | NativeNotTraceable] = {}


def _cached_recipe(op: Operation) -> tuple[_Recipe, list[int]]:
    key = _key(op)
    if key not in _RECIPES:
        try:
            _RECIPES[key] = _recipe(op)
        except NativeNotTraceable as e:
            _RECIPES[key] = e
    found = _RECIPES[key]
    if isinstance(found, NativeNotTraceable):
        raise found
    return found


def _result_indices(op: Operation) -> list[int]:
    """Which of the native's results each IR result is: by name (a static quant's IR op
    has no `scales` result; the native returns a copy of its scale there)."""
    assert isinstance(op, SemanticSignature)
    native = list(ALL_OPS[op.SEMANTIC_NAME].outputs)
    return [native.index(name) for name, _ in type(op).get_irdl_definition().results
            if getattr(op, name) is not None]


def _epsilon_operand(op: Operation) -> SSAValue | None:
    eps = [v for v in op.operands if not isinstance(v.type, TensorType)]
    return eps[0] if eps else None


def decompose(op: Operation) -> tuple[list[Operation], list[SSAValue]]:
    """The torch.call ops computing `op` as its native does, and the values of its results.
    NativeNotTraceable where the native cannot be spelled for these operand types."""
    recipe, operand_indices = _cached_recipe(op)
    inputs = [op.operands[i] for i in operand_indices]
    epsilon = _epsilon_operand(op)
    b = TorchBuilder()
    produced: list[Sequence[SSAValue]] = []

    def value(r: Any) -> Any:
        if isinstance(r, _Input):
            return inputs[r.index]
        if isinstance(r, _Value):
            return produced[r.step][r.result]
        if r is _EPSILON:
            if epsilon is None:
                raise NativeNotTraceable(f"{op.name}: no runtime epsilon operand")
            return epsilon
        if isinstance(r, list):
            return [value(x) for x in r]
        return r

    for step in recipe.steps:
        b.call(step.target, *(value(a) for a in step.args),
               kwargs={k: value(v) for k, v in step.kwargs} or None, results=step.results)
        produced.append(b.ops[-1].results)
    values = [value(recipe.outputs[i]) for i in _result_indices(op)]
    return b.ops, values

