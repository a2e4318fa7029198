"""The Triton launchers as torch ops and as provider "triton": fakes, export, compile,
registration and dispatch (CPU: Triton's interpreter)."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from vllm_xdsl import ops  # noqa: E402
from vllm_xdsl.backends.triton import register as R  # noqa: E402
from vllm_xdsl.backends.triton.compile import get_kernel, get_module  # noqa: E402
from vllm_xdsl.backends.triton.spec import KernelSpec  # noqa: E402
from vllm_xdsl.backends.triton.torch_ops import TORCH_OPS, torch_op  # noqa: E402
from vllm_xdsl.ops.tolerance import assert_close_contract  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
BF16, E4M3 = torch.bfloat16, torch.float8_e4m3fn
T = torch.ops.vllm_xdsl_triton


def randn(*shape, dtype=BF16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype).to(DEVICE)


TRITON_OPS = list(ops.ALL_OPS)  # the Triton kernel family implements every op


def test_one_torch_op_per_semantic_op_with_the_native_schema():
    assert set(TORCH_OPS) == set(TRITON_OPS)
    for name in TRITON_OPS:
        mine = torch_op(name)._schema
        native = getattr(torch.ops.vllm_xdsl, name).default._schema
        assert [a.name for a in mine.arguments] == [a.name for a in native.arguments]
        assert str(mine).split("(", 1)[1] == str(native).split("(", 1)[1]


def test_fakes_match_native_layout():
    with FakeTensorMode():
        x = torch.empty(5, 64, dtype=BF16, device=DEVICE)
        q, s = T.per_token_group_fp8_quant(x, 16, True)
        assert q.shape == (5, 64) and q.dtype == E4M3
        assert s.shape == (5, 4) and s.stride() == (1, 5)  # column-major
        q, r, s = T.fused_add_rms_norm_quant(x, x, None, 1e-6, None, None, E4M3, False, "token")
        assert r.dtype == BF16 and s.shape == (5, 1)


def test_eager_call_and_column_major_scales():
    x = randn(7, 64)
    q, s = T.per_token_group_fp8_quant(x, 16, True)
    want = ops.per_token_group_fp8_quant.native(x, 16, True)
    assert s.stride() == want[1].stride()
    assert_close_contract(q.cpu(), want[0].cpu())
    assert_close_contract(s.cpu(), want[1].cpu(), kind="scales")


class Block(torch.nn.Module):
    """A decoder-ish block calling the Triton ops directly, as an exported graph does."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(randn(64, seed=1), requires_grad=False)

    def forward(self, x, r):
        y, r2 = T.fused_add_rms_norm(x, r, self.w, 1e-6)
        q, s = T.rms_norm_quant(y * 2, self.w, 1e-5, None, None, E4M3, False, "group", 16)
        h = T.silu_and_mul(torch.cat([y, r2], dim=-1))
        return q, s, h


def _reference(x, r, w):
    y, r2 = ops.fused_add_rms_norm.native(x, r, w, 1e-6)
    q, s = ops.rms_norm_quant.native(y * 2, w, 1e-5, None, None, E4M3, False, "group", 16)
    return q, s, ops.silu_and_mul.native(torch.cat([y, r2], dim=-1))


def _check(got, want):
    for g, w, kind in zip(got, want, ("value", "scales", "value"), strict=True):
        assert_close_contract(g.cpu(), w.cpu(), kind=kind)


def test_exported_graph_runs_the_triton_ops():
    m = Block()
    x, r = randn(7, 64, seed=2), randn(7, 64, seed=3)
    ep = torch.export.export(m, (x, r))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {
        "vllm_xdsl_triton.fused_add_rms_norm.default",
        "vllm_xdsl_triton.rms_norm_quant.default",
    } <= targets
    _check(ep.module()(x, r), _reference(x, r, m.w))


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_torch_compile_dynamic_tokens(backend):
    m = Block()
    f = torch.compile(m, backend=backend, dynamic=True, fullgraph=True)
    for tokens in (3, 17):
        x, r = randn(tokens, 64, seed=tokens), randn(tokens, 64, seed=tokens + 1)
        _check(f(x, r), _reference(x, r, m.w))


def test_kernels_are_compiled_once_per_spec():
    spec = KernelSpec("silu_and_mul", BF16, block_size=32)
    assert get_kernel(spec) is get_kernel(KernelSpec("silu_and_mul", BF16, block_size=32))
    assert get_module(spec).__name__.startswith("vllm_xdsl_triton_gen.silu_and_mul_bf16_b32")


# --- provider registration -----------------------------------------------------------------


def test_every_op_has_a_triton_impl():
    for name, op in ops.ALL_OPS.items():
        assert "triton" in op.impls(), name


def test_dispatch_picks_triton_and_runs_it():
    x, w = randn(7, 64, seed=4), randn(64, seed=5)
    d = ops.select("rms_norm", (x, w, 1e-6), "rms_norm=triton!", DEVICE)
    assert d.provider == "triton"
    assert_close_contract(
        d.impl(x, w, 1e-6).cpu(), ops.rms_norm.native(x, w, 1e-6).cpu(), kind="norm"
    )
    with ops.priority("triton,native"):
        q, s = ops.dynamic_per_token_scaled_int8_quant(x)
    want = ops.dynamic_per_token_scaled_int8_quant.native(x)
    assert_close_contract(q.cpu(), want[0].cpu())
    assert_close_contract(s.cpu(), want[1].cpu(), kind="scales")


def test_argument_checks_give_reasons():
    x = randn(7, 64)
    d = ops.select("per_token_group_fp8_quant", (x, 24), "triton,native", DEVICE)
    assert d.provider == "native" and "power of two" in dict(d.rejected)["triton"]
    meta = ops.meta_args("rms_norm", (x, None, 1e-6))
    assert R.supports_args("rms_norm", **meta) is True
    meta["x"] = ops.TensorMeta(torch.int32, (7, 64), DEVICE)
    assert "dtype" in R.supports_args("rms_norm", **meta)
    meta["x"] = ops.TensorMeta(BF16, (None, 128 * 1024), "cuda")
    assert "one-block limit" in R.supports_args("rms_norm", **meta)


def test_cpu_needs_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    meta = ops.meta_args("rms_norm", (torch.empty(2, 16), None, 1e-6))
    assert "TRITON_INTERPRET=1" in R.supports_args("rms_norm", **meta)
    assert "interpreter" in R.available("cpu")
    assert R.available("cuda") is True and R.available("rocm") is True
    meta = {**meta, "x": ops.TensorMeta(BF16, (None, 4096), "cuda")}
    assert R.supports_args("rms_norm", **meta) is True
