"""Export's fake values: this project's ops that a pass created, repeated on inputs of the
same metadata, reuse one fake run and get what a fake run of each would give."""

from __future__ import annotations

import torch
from xdsl.context import Context

from vllm_xdsl import ops
from vllm_xdsl.backends.torch_export import export_module, meta
from vllm_xdsl.frontend import capture, import_graph
from vllm_xdsl.transforms.fusing.fuse_norm_quant import FuseNormQuantPass


def _layers(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    for _ in range(3):  # norm + quant, fused by the pass: three new ops of one metadata
        q = ops.static_scaled_fp8_quant(ops.rms_norm(x, w, 1e-6), s)
        # A sub, not an add: a bf16 residual add before the norm would be fused with it.
        x = q.float().to(x.dtype) * 0.5 - x
    return x


def _export_signatures(gm: torch.fx.GraphModule) -> list[tuple]:
    imported = import_graph(gm)
    FuseNormQuantPass().apply(Context(), imported.module)
    values = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    out = export_module(imported.module, gm, values)

    def sig(v):  # noqa: ANN001, ANN202
        return tuple(map(sig, v)) if isinstance(v, (list, tuple)) else meta.value_signature(v)

    return [(str(n.target), sig(n.meta.get("val")), id(n.meta.get("val"))) for n in
            out.graph.nodes if "vllm_xdsl" in str(n.target)]


def test_repeated_ops_share_one_fake_run_with_the_same_metadata(monkeypatch):
    x = torch.randn(5, 64, dtype=torch.bfloat16)
    gm = capture(_layers, x, torch.randn(64, dtype=torch.bfloat16), torch.tensor([0.1]))
    copies = []
    fresh_like = meta._fresh_like
    monkeypatch.setattr(meta, "_fresh_like", lambda v: copies.append(type(v)) or fresh_like(v))
    memoized = _export_signatures(gm)
    assert len(memoized) == 3 and copies.count(tuple) == 2  # one fake run, two copies
    assert len({i for *_, i in memoized}) == 3  # fresh fake values, not one shared object

    monkeypatch.setattr(meta, "_memo_key", lambda *args: None)  # every op runs on fakes
    plain = _export_signatures(gm)
    assert [s[:2] for s in memoized] == [s[:2] for s in plain]


def _hf_norm_then_add(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return (w * h.to(x.dtype)) + 1.0


def test_exported_nodes_keep_or_get_their_provenance():
    """Inductor names kernels after `original_aten` and lists `from_node` as source nodes:
    a node kept from the input keeps both, a node the native lowering created gets its
    own aten op (what AOTAutograd gives every node it traces)."""
    from vllm_xdsl.compile import transform
    from vllm_xdsl.pipeline_options import PipelineOptions

    x = torch.randn(4, 64, dtype=torch.bfloat16)
    gm = capture(_hf_norm_then_add, x, torch.randn(64, dtype=torch.bfloat16))
    source_add = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.add.Tensor
                      and n.args[1] == 1.0)
    assert "from_node" in source_add.meta  # AOTAutograd's, to be carried over
    out = transform(gm, PipelineOptions(target="cpu"))
    calls = [n for n in out.graph.nodes if n.op == "call_function"
             and isinstance(n.target, torch._ops.OpOverload)]
    assert torch.ops.aten.rsqrt.default in {n.target for n in calls}  # the lowered norm
    assert all(n.meta.get("original_aten") is not None for n in calls)
    rsqrt = next(n for n in calls if n.target is torch.ops.aten.rsqrt.default)
    assert rsqrt.meta["original_aten"] is torch.ops.aten.rsqrt.default
    kept = next(n for n in calls if n.target is torch.ops.aten.add.Tensor and n.args[1] == 1.0)
    assert kept.meta["from_node"] is source_add.meta["from_node"]
    assert kept.meta["original_aten"] is source_add.meta["original_aten"]
