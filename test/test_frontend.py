"""The FX importer: types, literals, size arithmetic, higher-order ops, constants, and
errors instead of silent drops."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx

from vllm_xdsl.backends.torch_export import export_module
from vllm_xdsl.dialects import make_context
from vllm_xdsl.frontend import FrontendError, capture, import_graph


@torch.library.custom_op("vxtest::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor, factor: float) -> None:
    x.mul_(factor)


def _roundtrip(gm: torch.fx.GraphModule, *args):
    imported = import_graph(gm)
    imported.module.verify()
    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    exported = export_module(imported.module, gm, vals)
    return imported, exported


def _real_inputs(gm: torch.fx.GraphModule, tensors) -> list:
    """The runtime inputs of an AOT graph: SymInt placeholders get their traced value."""
    it, real = iter(tensors), []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            val = n.meta["val"]
            real.append(val.node.hint if isinstance(val, torch.SymInt) else next(it))
    return real


def test_types_of_arguments_and_size_arithmetic() -> None:
    def f(x, idx, mask, q):
        n = x.shape[0]
        return x[: n // 2].sum() + idx.sum() + mask.sum() + q.float().sum(), n * 3

    args = (torch.randn(6, 8, dtype=torch.bfloat16), torch.arange(6, dtype=torch.int32),
            torch.ones(6, dtype=torch.bool), torch.zeros(6, dtype=torch.float8_e4m3fn))
    gm = capture(f, *args, dynamic=None, mark_dynamic={0: 0, 1: 0, 2: 0, 3: 0})
    imported, exported = _roundtrip(gm)
    text = str(imported.module)
    for t in ("i64", "tensor<?x8xbf16>", "tensor<?xi32>", "tensor<?xi1>", "tensor<?xf8E4M3FN>"):
        assert t in text
    assert "python::_operator." in text  # SymInt arithmetic kept as calls
    real = _real_inputs(gm, args)
    expected, got = gm(*real), exported(*real)
    assert torch.equal(expected[0], got[0]) and expected[1] == got[1] == 18


def test_symfloat_placeholder_is_f64() -> None:
    g = torch.fx.Graph()
    x, s = g.placeholder("x"), g.placeholder("s")
    out = g.call_function(torch.ops.aten.mul.Scalar, (x, s))
    g.output((out,))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    x.meta["val"], s.meta["val"], out.meta["val"] = torch.empty(2), 1.5, torch.empty(2)
    module = import_graph(gm).module
    assert "%s: f64" in str(module) and "aten::mul.Scalar" in str(module)


def test_literals_round_trip_through_text_and_export() -> None:
    def f(x):
        y = x.to(memory_format=torch.contiguous_format).clamp(min=float("-inf"), max=3.5)
        return torch.empty_like(y, dtype=torch.float16, device="cpu").fill_(1) + y.half(), y

    x = torch.randn(4, 3)
    gm = capture(f, x, dynamic=False)
    imported, exported = _roundtrip(gm)
    text = str(imported.module)
    from xdsl.parser import Parser

    reparsed = Parser(make_context(), text).parse_module()
    reparsed.verify()
    assert str(reparsed) == text
    again = export_module(reparsed, gm)
    for a, b, c in zip(gm(x), exported(x), again(x), strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_auto_functionalized_mutating_op() -> None:
    def f(x):
        y = x.clone()
        scale_(y, 2.0)
        return y + 1

    x = torch.randn(5, 4)
    gm = capture(f, x, dynamic=True)
    imported, exported = _roundtrip(gm)
    assert "higher_order::auto_functionalized" in str(imported.module)
    real = _real_inputs(gm, [x])
    assert torch.equal(exported(*real)[0], gm(*real)[0])
    assert torch.equal(exported(*real)[0], x * 2 + 1)


def test_get_attr_constant() -> None:
    g = torch.fx.Graph()
    x = g.placeholder("x")
    c = g.get_attr("const")
    out = g.call_function(torch.ops.aten.add.Tensor, (x, c))
    g.output((out,))
    root = torch.nn.Module()
    root.const = torch.tensor([1.0, 2.0])
    gm = torch.fx.GraphModule(root, g)
    x.meta["val"], out.meta["val"] = torch.empty(2), torch.empty(2)
    imported = import_graph(gm)
    assert 'torch.get_attr "const" : tensor<2xf32>' in str(imported.module)
    exported = export_module(imported.module, gm)
    assert torch.equal(exported(torch.ones(2))[0], torch.tensor([2.0, 3.0]))


def test_unrepresentable_nodes_are_errors_not_drops() -> None:
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(2)
    y = g.call_function(operator.getitem, (x, slice(0, 1)))
    y.meta["val"] = torch.empty(2)
    g.output((y,))
    with pytest.raises(FrontendError, match="cannot represent argument"):
        import_graph(torch.fx.GraphModule(torch.nn.Module(), g))

    g2 = torch.fx.Graph()
    x2 = g2.placeholder("x")
    x2.meta["val"] = torch.empty(2)
    m = g2.call_method("relu", (x2,))
    g2.output((m,))
    with pytest.raises(FrontendError, match="call_method"):
        import_graph(torch.fx.GraphModule(torch.nn.Module(), g2))

    g3 = torch.fx.Graph()
    x3 = g3.placeholder("x")
    x3.meta["val"] = torch.empty(2)
    lam = g3.call_function(lambda t: t, (x3,))
    lam.meta["val"] = torch.empty(2)
    g3.output((lam,))
    with pytest.raises(FrontendError, match="cannot be named"):
        import_graph(torch.fx.GraphModule(torch.nn.Module(), g3))


def test_getitem_on_tuple_and_python_getitem() -> None:
    def f(x):
        a, b = x.split(2, dim=-1)
        return a * b

    gm = capture(f, torch.randn(3, 4), dynamic=True)
    assert any(n.target is operator.getitem for n in gm.graph.nodes)
    imported, exported = _roundtrip(gm)
    assert "aten::split.Tensor" in str(imported.module)
    real = _real_inputs(gm, [torch.randn(3, 4)])
    assert torch.equal(exported(*real)[0], gm(*real)[0])
