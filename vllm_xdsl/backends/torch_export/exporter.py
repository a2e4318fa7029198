"""IR -> torch.fx.GraphModule.

- `torch.call` calls its overload (or higher-order op / Python function) with the literal
  arguments of its template; tuple results are read with getitem.
- `vllm.*` ops call `torch.ops.vllm_xdsl.*`, provider ops their backend's torch op.
- A runtime epsilon (a 0-d f64 tensor operand, as under `dynamic=True`): an unlowered
  `vllm` op is exported as its native decomposition traced with that tensor as epsilon
  (plain aten ops, no value ever baked in, Inductor can fuse it, decompose.py); a
  provider op, whose kernel takes a float, calls a wrapper op that reads the value at run
  time (runtime_eps.py).
- Provider implementation properties (block_size, vec_width, inplace) are not torch
  arguments; an `inplace` provider op is exported as its functional torch op (correct,
  without the in-place saving).
- `torch.get_attr` reads the constant from `owner` (the original GraphModule).

A call a pass created that repeats a pure call already in the graph (a lowered native
casting a scale that the dequantization beside it casts too) is that node: the graph
stays free of repeats, as AOTAutograd hands it over (reuse.existing_call).

Every node gets `meta["val"]`: copied from the FX node the op was imported from when its
inputs are unchanged, else computed by running the op on fake tensors, so Inductor sees
the same dtypes, strides and symbolic shapes as in the input graph.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch.fx._lazy_graph_module import _make_graph_module
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from vllm_xdsl.dialects.binding import native_args
from vllm_xdsl.dialects.call_targets import HIGHER_ORDER, PYTHON, resolve_target
from vllm_xdsl.dialects.fx_location import fx_origin
from vllm_xdsl.dialects.torch import CallOp, GetAttrOp
from vllm_xdsl.dialects.vllm import NormOp, SemanticSignature

from .decompose import decomposition_table, inline_native, inline_traced
from .literals import ExportError, python_value
from .meta import FakeRunner, value_signature
from .reuse import SourceValues, existing_call
from .runtime_eps import tensor_epsilon_op
from .semantic import provider_of, result_indices, torch_overload

# Metadata worth keeping from the original node (val is handled separately). Inductor
# names its kernels after `original_aten` and lists `from_node` as their source nodes.
_KEPT_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "original_aten", "seq_nr",
              "from_node")


def _returns_tuple(target: Any, op: CallOp) -> bool:
    name = op.target.data
    if name.startswith(f"{PYTHON}::"):
        return False
    if name.startswith(f"{HIGHER_ORDER}::"):
        return True
    returns = target._schema.returns
    return len(returns) != 1 or isinstance(returns[0].type, torch.ListType)


class Exporter:
    def __init__(
        self, owner: torch.nn.Module | None, example_values: list[Any] | None, decompose: bool,
    ) -> None:
        self.graph = torch.fx.Graph()
        self.owner = owner
        self.nodes: dict[SSAValue, torch.fx.Node] = {}
        # The imported graph's nodes by name: an op's location names the one it came from.
        self.sources: dict[str, torch.fx.Node] = (
            {n.name: n for n in owner.graph.nodes} if isinstance(owner, torch.fx.GraphModule)
            else {}
        )
        self.fake = FakeRunner(example_values)
        self.example_values = example_values
        self.decompositions = decomposition_table() if decompose and self.fake.enabled else {}
        self.traces: dict[Any, torch.fx.GraphModule] = {}  # inline_traced's cache
        self.targets: dict[str, tuple[Any, bool]] = {}  # Exporter.target's
        self.reused: set[torch.fx.Node] = set()  # sources whose val a node took

    def node(self, value: SSAValue) -> torch.fx.Node:
        return self.nodes[value]

    def source(self, op: Operation) -> torch.fx.Node | None:
        """The FX node `op` was imported from, or None (a pass created it)."""
        name = fx_origin(op)
        return None if name is None else self.sources.get(name)

    def export(self, fn: func.FuncOp) -> torch.fx.GraphModule:
        block = fn.body.block
        live = {s for op in block.ops if (s := self.source(op)) is not None}
        if live:
            graph = next(iter(live)).graph
            self.fake.take_known = SourceValues(graph, live, self.fake.has_unbacked_symbols).take
        for i, arg in enumerate(block.args):
            node = self.graph.placeholder(f"{arg.name_hint or 'arg'}_{i}")  # unique targets
            if self.example_values is not None:
                node.meta["val"] = self.example_values[i]
            self.nodes[arg] = node
        for op in block.ops:
            self.op(op)
        _name_aten_origins(self.graph)
        root = self.owner if self.owner is not None else torch.nn.Module()
        # Lazy where torch compiles lazily (under torch.compile, unless the user turned it
        # off): the Python code is generated when first needed. Inductor never runs it and
        # generates it once for its cache key, so generating it here too would be wasted.
        return _make_graph_module(root, self.graph)

    def op(self, op: Operation) -> None:
        if isinstance(op, CallOp):
            self.call(op)
        elif isinstance(op, SemanticSignature):
            self.semantic(op)
        elif isinstance(op, GetAttrOp):
            if self.owner is None:
                raise ExportError(f"torch.get_attr {op.attr_name.data!r} needs an owner module")
            node = self.graph.get_attr(op.attr_name.data)
            self.finish(op, node, [op.result], False)
        elif isinstance(op, func.ReturnOp):
            self.graph.output(tuple(self.node(v) for v in op.arguments))
        else:
            raise ExportError(f"op {op.name} has no torch counterpart (lower it first)")

    def target(self, op: CallOp) -> tuple[Any, bool]:
        """The callable of a torch.call and whether it returns a tuple, once per name."""
        name = op.target.data
        if name not in self.targets:
            try:
                target = resolve_target(name)
            except (AttributeError, ImportError, RuntimeError) as e:
                raise ExportError(f"torch.call target {name!r} not found: {e}") from None
            self.targets[name] = (target, _returns_tuple(target, op))
        return self.targets[name]

    def call(self, op: CallOp) -> None:
        target, is_tuple = self.target(op)
        operands = op.operands  # = inputs, without IRDL's variadic bookkeeping per use

        def operand(i: int) -> torch.fx.Node:
            return self.nodes[operands[i]]

        args = tuple(python_value(a, operand) for a in op.args.data)
        kwargs = {k: python_value(v, operand) for k, v in (op.kwargs.data if op.kwargs else {}).items()}
        imported = self.source(op) is not None
        if not imported and target in self.decompositions:
            # A pass created it: spell it as AOTAutograd would (Inductor expects that).
            outs = inline_traced(
                self.graph, lambda a, k: target(*a, **k), [args, kwargs], self.fake, op.target.data,
                self.traces,
            )
            for value, out in zip(op.outputs, outs, strict=True):
                self.nodes[value] = out
            return
        if not imported and not is_tuple:
            same = existing_call(target, args, kwargs)
            if same is not None:
                self.nodes[op.outputs[0]] = same
                return
        node = self.graph.call_function(target, args, kwargs)
        self.finish(op, node, list(op.outputs), is_tuple)

    def semantic(self, op: SemanticSignature) -> None:
        eps_value = op.epsilon_value if isinstance(op, NormOp) else None
        runtime_tensor = eps_value is not None and isinstance(eps_value.type, TensorType)
        args = native_args(op, self.node)
        args.update(op.torch_extra_args())  # e.g. auto.*: its bucket table
        indices = result_indices(op)
        if runtime_tensor and provider_of(op) == "vllm":
            outs = inline_native(self.graph, op.SEMANTIC_NAME, args, self.fake, self.traces)
            for value, index in zip(op.results, indices, strict=True):
                self.nodes[value] = outs[index]
            return
        overload = torch_overload(op)
        if runtime_tensor:
            overload = tensor_epsilon_op(overload, op.SEMANTIC_NAME)
        node = self.graph.call_function(overload, tuple(args.values()))
        self.finish(op, node, list(op.results), len(_outputs(op)) > 1, indices)

    def finish(
        self, op: Operation, node: torch.fx.Node, results: list[SSAValue], is_tuple: bool,
        indices: list[int] | None = None,
    ) -> None:
        source = self.source(op)
        if source is not None:
            for key in _KEPT_META:
                if key in source.meta:
                    node.meta[key] = source.meta[key]
        if source is not None and "val" in source.meta and (
            _same_inputs(node, source)
            or (source not in self.reused and _equivalent_inputs(node, source))
        ):
            node.meta["val"] = source.meta["val"]
            self.reused.add(source)
        else:
            self.fake.run(node)
        _mark_low_precision(node)
        if not is_tuple:
            self.nodes[results[0]] = node
            return
        for value, index in zip(results, indices or range(len(results)), strict=True):
            if value.uses:
                item = self.graph.call_function(operator.getitem, (node, index))
                self.fake.run(item)
                self.nodes[value] = item


def _mark_low_precision(node: torch.fx.Node) -> None:
    """Mark an op on f16/bf16 values as AOTAutograd's tracing marks each op eager runs
    (proxy_tensor's pointwise barrier), where Inductor emulates eager's casts: Inductor then
    rounds such an op's inputs and result to their dtype inside a fused kernel, as eager
    does. Unmarked, a bf16 product read by a quant in the same kernel stays in f32 and the
    int8 values move (test_post_grad.py). The mark alone makes Inductor round, so it is set
    only under the setting, as tracing sets it."""
    from torch._inductor import config

    if not config.emulate_precision_casts or not isinstance(node.target, torch._ops.OpOverload):
        return
    values = [node.meta.get("val"), *(n.meta.get("val") for n in node.all_input_nodes)]
    if any(isinstance(v, torch.Tensor) and v.dtype in _LOW_PRECISION for v in values):
        node.meta["low_precision_pointwise_barrier"] = True


_LOW_PRECISION = (torch.bfloat16, torch.float16)


def _name_aten_origins(graph: torch.fx.Graph) -> None:
    """Give each aten node a pass created its own op as `original_aten`, as AOTAutograd
    gives every node it traces: without it Inductor names the kernels of a lowered norm
    `cpp_fused_6` instead of `..._mean_mul_pow_rsqrt_...` and lists no ATen ops for them."""
    for node in graph.nodes:
        if (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
                and node.meta.get("original_aten") is None):
            node.meta["original_aten"] = node.target


def _outputs(op: SemanticSignature) -> tuple[str, ...]:
    from vllm_xdsl import ops

    return ops.ALL_OPS[op.SEMANTIC_NAME].outputs


def _same_inputs(node: torch.fx.Node, source: torch.fx.Node) -> bool:
    """Whether the new node reads exactly the (fake) values the original node read."""
    new, old = node.all_input_nodes, source.all_input_nodes
    return len(new) == len(old) and all(
        a.meta.get("val") is b.meta.get("val") and "val" in a.meta for a, b in zip(new, old, strict=True)
    ) and node.target is source.target


_ANY_NODE: Any = object()  # stands for every node in literals() (compared by identity)


def _equivalent_inputs(node: torch.fx.Node, source: torch.fx.Node) -> bool:
    """Whether the new node computes what the original node did on inputs with the same
    metadata (a value a pass replaced by an equal-shaped one), so that it may take the
    original's fake value: same target and literals, no output aliasing an input (its
    value's storage would be the original input's), every input value the same object or
    with the same value_signature. Saves one fake run per node downstream of a rewrite."""
    schema = getattr(node.target, "_schema", None)
    if node.target is not source.target or schema is None:
        return False
    if any(r.alias_info is not None for r in schema.returns):
        return False
    new, old = node.all_input_nodes, source.all_input_nodes
    if len(new) != len(old):
        return False
    for a, b in zip(new, old, strict=True):
        if "val" not in a.meta or "val" not in b.meta:
            return False
        va, vb = a.meta["val"], b.meta["val"]
        if va is not vb and (value_signature(va) is None
                             or value_signature(va) != value_signature(vb)):
            return False

    def literals(n: torch.fx.Node) -> Any:
        return torch.fx.node.map_arg((n.args, n.kwargs), lambda _: _ANY_NODE)

    try:
        return bool(literals(node) == literals(source))
    except Exception:  # a literal without a plain == (e.g. a tensor): do not guess
        return False


def export_module(
    module: ModuleOp,
    owner: torch.nn.Module | None = None,
    example_values: list[Any] | None = None,
    decompose: bool = True,
) -> torch.fx.GraphModule:
    """The GraphModule computing the module's one function.

    `owner` holds the get_attr constants; when it is the GraphModule the module was
    imported from, each op located at one of its nodes (dialects/fx_location.py) takes
    that node's metadata. `example_values` are the (fake) values of the arguments, e.g. the
    input graph's placeholder `meta["val"]`, for metadata. With `decompose`, ops created by
    passes are decomposed as AOTAutograd does for Inductor.
    """
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(funcs) != 1:
        raise ExportError(f"expected one func.func in the module, found {len(funcs)}")
    return Exporter(owner, example_values, decompose).export(funcs[0])
