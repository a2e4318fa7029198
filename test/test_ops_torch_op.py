"""Every op is a torch custom op with the native's schema, a correct fake and one graph node."""

from __future__ import annotations

import pytest
import torch

from vllm_xdsl import ops

E4M3 = torch.float8_e4m3fn


def sample_args(name: str) -> list[tuple]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 128, generator=g).to(torch.bfloat16)
    r = torch.randn(7, 128, generator=g).to(torch.bfloat16)
    w = torch.randn(128, generator=g).to(torch.bfloat16)
    sc = torch.tensor([0.02])
    return {
        "rms_norm": [(x, w, 1e-6), (x, None, 1e-5, 64)],
        "fused_add_rms_norm": [(x, r, w, 1e-6), (x.float(), r.float(), None, 1e-6)],
        "static_scaled_fp8_quant": [(x, sc), (x, sc, torch.float8_e4m3fnuz)],
        "dynamic_scaled_fp8_quant": [(x,)],
        "dynamic_per_token_scaled_fp8_quant": [(x,), (x, torch.tensor([1.0]))],
        "per_token_group_fp8_quant": [(x, 64), (x, 32, True, True)],
        "static_scaled_int8_quant": [(x, sc)],
        "dynamic_per_token_scaled_int8_quant": [(x,)],
        "silu_and_mul": [(x,), (x, r)],
        "gelu_and_mul": [(x,), (x, r)],
        "gelu_tanh_and_mul": [(x,), (x.float(), r.float())],
        "fatrelu_and_mul": [(x, 0.1), (x.float(), -0.5, r.float())],
        "gelu_and_mul_sparse": [(x, 1.6448536269514722, "tanh"), (x.float(), 0.5, "none", r.float())],
        "rms_norm_quant": [(x, w, 1e-6, sc, None, E4M3, True, "tensor"),
                           (x, w, 1e-6, None, None, E4M3, False, "group", 64, True)],
        "fused_add_rms_norm_quant": [(x, r, w, 1e-6, None, None, torch.int8, False, "token")],
        "silu_and_mul_quant": [(x, sc, None, E4M3, True, "tensor")],
        "gelu_and_mul_quant": [(x, None, None, E4M3, False, "group", 64, True, True, 1e-10, None,
                                "", r)],
        "gelu_tanh_and_mul_quant": [(x, sc, None, torch.int8, True, "tensor", 0, False, False,
                                     1e-10, None, "", r), (x, None, None, E4M3, False, "token")],
    }[name]


@pytest.mark.parametrize("name", list(ops.ALL_OPS))
def test_opcheck(name):
    op = ops.ALL_OPS[name]
    assert getattr(torch.ops.vllm_xdsl, name).default._schema.name == f"vllm_xdsl::{name}"
    for args in sample_args(name):
        torch.library.opcheck(op.torch_op, args)
        got, want = op.torch_op(*args), op.native(*args)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        assert len(got) == len(op.outputs)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.stride() == b.stride()
            assert torch.equal(a.float(), b.float())


def test_schema_matches_native_signature():
    for name, op in ops.ALL_OPS.items():
        schema = op.torch_op._opoverload._schema
        assert [a.name for a in schema.arguments] == list(op.signature.parameters), name
        assert len(schema.returns) == len(op.outputs), name


def test_compiled_call_is_one_node():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    @torch.compile(backend=backend, fullgraph=True)
    def f(x, w):
        return ops.rms_norm(x, w, 1e-6)

    x, w = torch.randn(3, 64), torch.randn(64)
    assert torch.equal(f(x, w), ops.rms_norm.native(x, w, 1e-6))
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert targets == [torch.ops.vllm_xdsl.rms_norm.default]


def test_inplace_outputs_declared():
    assert ops.rms_norm.inplace_outputs == {"out": "x"}
    assert ops.fused_add_rms_norm.inplace_outputs == {"out": "x", "residual_out": "residual"}
    assert ops.fused_add_rms_norm_quant.inplace_outputs == {"residual_out": "residual"}
    assert set(ops.UNFUSED) | set(ops.FUSED) == set(ops.ALL_OPS)
    assert not set(ops.UNFUSED) & set(ops.FUSED)
