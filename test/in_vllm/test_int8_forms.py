"""vLLM CPU's int8 forms with its real kernels:
- vllm_schemas' fallback record against the installed vLLM: every op of the record that
  vLLM's CPU build registers (with arguments: its fp8 quants are stubs) takes the same
  arguments (count, types, which are written), and the CPU-spelled stand-ins of
  test/test_raise_vllm_spelling.py are its schemas word for word;
- vLLM's oneDNN-path quants after a native norm (its `_custom_ops.onednn_scaled_int8_quant`
  forms: a 0-d static scale, dynamic per token), raised and fused, compute bit for bit
  what its kernels compute (eager: the exported graph against the captured one)."""

from __future__ import annotations

import importlib

import pytest

pytest.importorskip("vllm")

import torch  # noqa: E402
from helpers.vllm_cpu_int8 import CPU_SCHEMAS, compiled  # noqa: E402

from vllm_xdsl.transforms.raising import vllm_schemas as schemas  # noqa: E402

CPU_OPS = {"_C::rms_norm", "_C::fused_add_rms_norm", "_C::silu_and_mul", "_C::gelu_and_mul",
           "_C::gelu_tanh_and_mul", "_C::static_scaled_int8_quant",
           "_C::dynamic_scaled_int8_quant"}


@pytest.fixture(scope="module", autouse=True)
def kernels() -> None:
    importlib.import_module("vllm.platforms").current_platform.import_kernels()


def test_fallback_agrees_with_the_installed_vllm() -> None:
    read = {name for name in schemas.SCHEMAS if schemas.installed(name) is not None}
    assert CPU_OPS <= read, sorted(CPU_OPS - read)
    for name in read:
        installed = schemas.installed(name)
        assert schemas.agrees(name, installed), (name, str(installed), schemas.SCHEMAS[name])
        assert schemas.spelling(name) is not None


def test_the_cpu_build_spells_the_written_output_out() -> None:
    for name in ("_C::static_scaled_int8_quant", "_C::rms_norm", "_C::silu_and_mul"):
        sp = schemas.spelling(name)
        assert sp is not None and sp.written()[0] == "out"
        assert sp.canonical["out"] == "result"  # the fallback's (CUDA build's) name


def test_cpu_standins_are_the_installed_schemas() -> None:
    for name, text in CPU_SCHEMAS.items():
        want = torch._C.parse_schema(f"_C::{text}")
        got = schemas.installed(name)
        assert got is not None
        assert [(a.name, str(a.type), a.alias_info is not None and a.alias_info.is_write)
                for a in got.arguments] == \
               [(a.name, str(a.type), a.alias_info is not None and a.alias_info.is_write)
                for a in want.arguments], name


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_real_kernels_raised_fused_and_bit_exact(static: bool, v2: bool) -> None:
    g = torch.Generator().manual_seed(0)
    x, attn = (torch.randn(33, 136, generator=g).to(torch.bfloat16) for _ in range(2))
    w = torch.rand(136, generator=g).to(torch.bfloat16) + 0.5
    seen = compiled((x, w, attn), torch.tensor(0.03) if static else None, v2)
    quant = ("vllm.static_scaled_int8_quant" if static
             else "vllm.dynamic_per_token_scaled_int8_quant")
    assert seen["raised"] == {"vllm.rms_norm": 1, quant: 2}, seen
    assert seen["fused"] == {"vllm.rms_norm_quant": 1, quant: 1}, seen
    assert seen["kernel_calls"] == 0 and seen["equal"] is True, seen


def test_cpu_norm_and_act_kernels_left_alone() -> None:
    """vLLM CPU's `_C.rms_norm` and `_C.silu_and_mul` round once from f32 (vllm_forms.py's
    module doc): read now that their `out` is read, but not raised onto our ops."""
    from vllm_xdsl.dialects import make_context
    from vllm_xdsl.frontend import capture, import_graph
    from vllm_xdsl.transforms.raising.raise_native import RaiseNativePass

    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = torch.empty_like(x)
        torch.ops._C.rms_norm(n, x, w, 1e-6)
        a = torch.empty(x.shape[0], x.shape[1] // 2, dtype=x.dtype)
        torch.ops._C.silu_and_mul(a, x)
        return n, a

    x = torch.randn(5, 128).to(torch.bfloat16)
    module = import_graph(capture(fn, x, x[0].clone(), dynamic=False)).module
    for name in ("_C::rms_norm", "_C::silu_and_mul"):
        assert schemas.spelling(name) is not None
    RaiseNativePass().apply(make_context(), module)
    assert not any(op.name.startswith("vllm.") for op in module.walk())
