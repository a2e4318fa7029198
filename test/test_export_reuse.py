"""Export gives a node that recomputes an input-graph node that input node's fake value
(reuse.py): the same metadata a fake run gives, never one value for two nodes, never a
view's value for a view of another tensor."""

from __future__ import annotations

from typing import Any

import torch

from vllm_xdsl.backends.torch_export import export_module, meta, reuse
from vllm_xdsl.frontend import capture, import_graph
from vllm_xdsl.models import DecoderConfig, TinyDecoder
from vllm_xdsl.pipeline import PipelineOptions, run_pipeline


def _signature(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(map(_signature, value))
    return meta.value_signature(value)


def _export(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    imported = import_graph(gm)
    run_pipeline(imported.module, PipelineOptions(target="cpu"))
    values = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    return export_module(imported.module, gm, values)


def _decoder_graph() -> torch.fx.GraphModule:
    torch.manual_seed(0)
    config = DecoderConfig(vocab=64, hidden=64, intermediate=128, heads=4, layers=2)
    model = TinyDecoder(config).eval().to(torch.bfloat16)
    with torch.no_grad():
        return capture(model, torch.randint(0, 64, (7,)))


def test_reused_values_have_the_metadata_of_a_fake_run(monkeypatch):
    gm = _decoder_graph()
    taken: list[torch.fx.Node] = []
    take = reuse.SourceValues.take
    monkeypatch.setattr(reuse.SourceValues, "take",
                        lambda self, node: take(self, node) and (taken.append(node) or True))
    reused = _export(gm)
    monkeypatch.setattr(reuse.SourceValues, "take", lambda self, node: False)
    plain = _export(gm)

    def signatures(g: torch.fx.GraphModule) -> list[tuple[str, Any]]:
        return [(str(n.target), _signature(n.meta.get("val"))) for n in g.graph.nodes]

    assert signatures(reused) == signatures(plain)
    assert len(taken) >= 20  # the lowered natives recompute most of what was raised
    vals = [id(n.meta["val"]) for n in reused.graph.nodes
            if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)]
    assert len(vals) == len(set(vals))  # no fake value is shared by two nodes


def test_a_view_takes_only_the_value_of_a_view_of_the_same_tensor():
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x[:, :4].relu(), y[:, :4].relu()

    gm = capture(f, torch.randn(3, 8), torch.randn(3, 8), dynamic=False)
    source = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.slice.Tensor)
    x, y = (n for n in gm.graph.nodes if n.op == "placeholder")
    values = reuse.SourceValues(gm.graph, set())

    graph = torch.fx.Graph()
    new_y, new_x = (graph.placeholder(name) for name in ("y", "x"))
    new_y.meta["val"], new_x.meta["val"] = y.meta["val"], x.meta["val"]
    of_y = graph.call_function(torch.ops.aten.slice.Tensor, (new_y, *source.args[1:]))
    assert values.take(of_y)  # the slice of y in the input graph (same tensor)
    assert of_y.meta["val"] is not source.meta["val"]  # source sliced x: y's slice taken
    other = graph.call_function(torch.ops.aten.slice.Tensor, (new_y, *source.args[1:]))
    assert not values.take(other)  # y's slice is taken; x's has another storage
    relu = graph.call_function(torch.ops.aten.relu.default, (other,))
    with of_y.meta["val"].fake_mode:  # any value of the same metadata
        other.meta["val"] = meta._fresh_like(of_y.meta["val"])
    assert values.take(relu)  # a functional op: any unused relu of that metadata


def test_literals_of_other_types_do_not_match():
    def f(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    gm = capture(f, torch.randn(4), dynamic=False)
    source = next(n for n in gm.graph.nodes if n.op == "call_function")
    placeholder = next(n for n in gm.graph.nodes if n.op == "placeholder")
    assert source.args[1] == 2 and type(source.args[1]) is int
    values = reuse.SourceValues(gm.graph, set())
    graph = torch.fx.Graph()
    new = graph.placeholder("x")
    new.meta["val"] = placeholder.meta["val"]
    as_float = graph.call_function(source.target, (new, 2.0))
    assert not values.take(as_float)
    as_int = graph.call_function(source.target, (new, 2))
    assert values.take(as_int)


def _pure_repeats(graph: torch.fx.Graph) -> list[str]:
    seen: dict[Any, torch.fx.Node] = {}
    repeats = []
    for n in graph.nodes:
        if n.op != "call_function" or not reuse._is_pure(n.target):
            continue
        key = (n.target, reuse._freeze((n.args, n.kwargs), reuse._itself))
        if key in seen:
            repeats.append(f"{n.format_node()} repeats {seen[key].name}")
        seen.setdefault(key, n)
    return repeats


def test_export_merges_a_lowered_call_into_the_same_earlier_one():
    """The lowered natives recompute values the graph has (a static scale's cast to fp32,
    which the dequantization next to it casts too): export gives such a call the earlier
    node, so the graph holds fewer repeated pure calls than the IR (AOTAutograd's own
    repeats, such as iota, and an imported call after a lowered one stay)."""
    from vllm_xdsl.dialects.torch import CallOp

    gm = _decoder_graph()
    imported = import_graph(gm)
    run_pipeline(imported.module, PipelineOptions(target="cpu"))
    calls = [(op.target.data, tuple(op.inputs), str(op.args), str(op.kwargs))
             for op in imported.module.walk() if isinstance(op, CallOp)
             and op.target.data.startswith("prims::convert")]
    ir_repeats = len(calls) - len(set(calls))
    values = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    exported = export_module(imported.module, gm, values)
    casts = [r for r in _pure_repeats(exported.graph) if "convert_element_type" in r]
    assert ir_repeats >= 4 and len(casts) < ir_repeats / 2


def test_only_the_same_pure_call_is_an_existing_one():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    aten = torch.ops.aten
    add = graph.call_function(aten.add.Tensor, (x, 0.0))
    assert reuse.existing_call(aten.add.Tensor, (x, 0.0), {}) is add
    assert reuse.existing_call(aten.add.Tensor, (x, -0.0), {}) is None  # x + -0.0 keeps -0.0
    assert reuse.existing_call(aten.add.Tensor, (x, 0), {}) is None  # an int: other promotion
    assert reuse.existing_call(aten.add.Tensor, (x, 0.0), {"alpha": 2}) is None
    assert reuse.existing_call(aten.sub.Tensor, (x, 0.0), {}) is None
    graph.call_function(aten.bernoulli.p, (x, 0.5))
    assert reuse.existing_call(aten.bernoulli.p, (x, 0.5), {}) is None  # random: two draws
    graph.call_function(aten.empty_like.default, (x,))
    assert reuse.existing_call(aten.empty_like.default, (x,), {}) is None  # two buffers
    graph.call_function(aten.add_.Tensor, (x, 1.0))
    assert reuse.existing_call(aten.add_.Tensor, (x, 1.0), {}) is None  # mutates


def test_values_with_data_dependent_sizes_are_never_taken():
    """A data-dependent size is a runtime value of its own: a node taking such a value
    would share it. Graphs whose shape env made no such symbol skip the check."""
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.nonzero().float().relu(), x.relu()

    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        gm = capture(f, torch.randn(6))
    values = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    assert meta.FakeRunner(values).has_unbacked_symbols
    relu_of_nonzero = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.relu.default
                           and reuse._has_unbacked(n.meta["val"]))
    index = reuse.SourceValues(gm.graph, set(), unbacked=True)
    assert not any(relu_of_nonzero in nodes for nodes in index._by_key.values())
    assert any(relu_of_nonzero in nodes
               for nodes in reuse.SourceValues(gm.graph, set(), unbacked=False)._by_key.values())

    plain = capture(lambda x: x.relu(), torch.randn(6))
    values = [n.meta["val"] for n in plain.graph.nodes if n.op == "placeholder"]
    assert not meta.FakeRunner(values).has_unbacked_symbols


def test_export_generates_no_python_code_under_torch_compile():
    """Under torch.compile (which makes graph modules lazy) the exported module generates
    its Python code when first needed: Inductor never runs it, and generates it for its
    cache key itself. It still runs, and prints, like any GraphModule."""
    from torch.fx._lazy_graph_module import _LazyGraphModule, _use_lazy_graph_module

    gm = capture(lambda x: (x * 2).relu(), torch.randn(4), dynamic=False)
    x = torch.randn(4)
    with _use_lazy_graph_module(True):
        lazy = export_module(import_graph(gm).module)
    assert isinstance(lazy, _LazyGraphModule) and lazy._needs_recompile()
    assert "relu" in lazy.code
    torch.testing.assert_close(lazy(x), ((x * 2).relu(),), rtol=0, atol=0)
    with _use_lazy_graph_module(False):
        assert not isinstance(export_module(import_graph(gm).module), _LazyGraphModule)
