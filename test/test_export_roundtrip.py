"""Import then export with no pass in between is bitwise exact, on real Dynamo graphs."""

from __future__ import annotations

import pytest
import torch
from xdsl.parser import Parser

from vllm_xdsl import ops
from vllm_xdsl.backends.torch_export import export_module
from vllm_xdsl.dialects import make_context
from vllm_xdsl.frontend import import_graph
from vllm_xdsl.frontend.capture import aot_backend
from vllm_xdsl.models import DecoderConfig, DecoderLayer, TinyDecoder


class SemanticOps(torch.nn.Module):
    """Graphs that already hold vllm_xdsl ops, fused static and dynamic included."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(64) + 0.5)
        self.register_buffer("scale", torch.tensor([0.05]))

    def forward(self, x: torch.Tensor, r: torch.Tensor):
        q, s = ops.rms_norm_quant(x, self.w, 1e-6, self.scale, None, torch.float8_e4m3fn,
                                  True, "tensor")
        q2, res, s2 = ops.fused_add_rms_norm_quant(x, r, self.w, 1e-5, None, None,
                                                   torch.float8_e4m3fn, False, "token")
        g, gs = ops.per_token_group_fp8_quant(x, 32, True)
        y = ops.silu_and_mul(x)
        return q.float() * s, q2.float() * s2, res, g.float(), gs, y, x.shape[0] + 1


def _roundtrip_backend(results: list[bool], graphs: list[str]):
    def fw(gm: torch.fx.GraphModule, example_inputs):
        imported = import_graph(gm)
        imported.module.verify()
        graphs.append(str(imported.module))
        vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        exported = export_module(imported.module, gm, vals)

        def run(*args):
            expected, got = gm(*args), exported(*args)
            results.append(
                len(expected) == len(got)
                and all(_same(a, b) for a, b in zip(expected, got, strict=True))
            )
            return got

        return run

    return aot_backend(fw)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride() and (
            torch.equal(a.view(torch.uint8), b.view(torch.uint8))
            if a.dtype.itemsize == 1 else torch.equal(a, b)
        )
    return a == b


CASES = {
    "semantic_ops": (lambda: SemanticOps(), lambda t: (torch.randn(t, 64), torch.randn(t, 64)),
                     torch.float32),
    "llama_layer_bf16": (lambda: DecoderLayer(DecoderConfig()), lambda t: (torch.randn(t, 128),),
                         torch.bfloat16),
    "qwen3_gemma_layer_f16": (
        lambda: DecoderLayer(DecoderConfig(qk_norm=True, norm="gemma")),
        lambda t: (torch.randn(t, 128),), torch.float16),
    "tiny_decoder": (lambda: TinyDecoder(DecoderConfig(layers=1)),
                     lambda t: (torch.randint(0, 256, (t,)),), torch.float32),
}


@pytest.mark.parametrize(
    ("name", "form"),
    [(name, "dynamic") for name in CASES]
    + [("semantic_ops", "mark_dynamic")],
)
def test_import_export_is_bitwise_exact(name: str, form: str) -> None:
    make, inputs, dtype = CASES[name]
    torch.manual_seed(0)
    model = make().to(dtype)
    results: list[bool] = []
    graphs: list[str] = []
    compiled = torch.compile(model, backend=_roundtrip_backend(results, graphs),
                             dynamic=True if form == "dynamic" else None)
    with torch.no_grad():
        for t in (3, 17, 5):
            args = [a.to(dtype) if a.is_floating_point() else a for a in inputs(t)]
            if form == "mark_dynamic":
                for a in args:
                    torch._dynamo.mark_dynamic(a, 0)
            compiled(*args)
    assert len(graphs) == 1, "one compile must serve every token count"
    assert results == [True, True, True]
    # The printed IR is text vllm-opt reads back (what VLLM_XDSL_DUMP_DIR writes).
    reparsed = Parser(make_context(), graphs[0]).parse_module()
    reparsed.verify()
    assert str(reparsed) == graphs[0]
    if name == "semantic_ops":
        for op in ("vllm.rms_norm_quant", "vllm.fused_add_rms_norm_quant",
                   "vllm.per_token_group_fp8_quant", "vllm.silu_and_mul"):
            assert op in graphs[0]
