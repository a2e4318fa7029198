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
    return export_module(imported.module, gm, values, imported.origin)


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
