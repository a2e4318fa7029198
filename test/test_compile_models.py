"""The vllm_xdsl backend on the models of issue 3: matches eager within the OPS.md
whole-model tolerance at 3 token counts with ONE compile, and the expected semantic ops
appear after raise-native (and fused ops after fuse-norm-quant)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from vllm_xdsl import compile as backend
from vllm_xdsl.models import DecoderConfig, DecoderLayer, GemmaRMSNorm, LlamaRMSNorm, Mlp
from vllm_xdsl.models.llama import Fp8Linear

TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
TOKENS = (3, 17, 64)
HIDDEN = 128


class NormViewQuant(torch.nn.Module):
    """RMSNorm, a view that keeps the last dim, then an fp8-quantized linear."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = LlamaRMSNorm(HIDDEN, 1e-5)
        self.proj = Fp8Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(x).view(1, -1, HIDDEN))


# name -> (factory, semantic ops after raise-native, after the whole pipeline if checked)
FUSED_ADD_NOTE = "the fused rounded residual add"
MODELS = {
    # The f16/bf16 residual add is rounded before the norm: raise-native makes it the
    # rounded_sum variant of fused_add_rms_norm, which computes exactly that.
    "llama_layer": (lambda: DecoderLayer(DecoderConfig(hidden=HIDDEN, fp8=False)),
                    {"vllm.rms_norm": 1, "vllm.fused_add_rms_norm": 1, "vllm.silu_and_mul": 1}),
    "qwen3_layer": (lambda: DecoderLayer(DecoderConfig(hidden=HIDDEN, qk_norm=True, fp8=False)),
                    {"vllm.rms_norm": 3, "vllm.fused_add_rms_norm": 1, "vllm.silu_and_mul": 1}),
    "gemma_norm": (lambda: GemmaRMSNorm(HIDDEN), {"vllm.rms_norm": 1}),
    "mlp_silu_mul": (lambda: Mlp(DecoderConfig(hidden=HIDDEN, fp8=False)),
                     {"vllm.silu_and_mul": 1}),
    "norm_view_quant": (NormViewQuant,
                        {"vllm.rms_norm": 1, "vllm.static_scaled_fp8_quant": 1}),
}
XFAIL: set[tuple[str, torch.dtype]] = set()  # was the fused rounded add; see raising/residual_add.py


def semantic(counts: Counter) -> dict[str, int]:
    return {k: v for k, v in counts.items() if k.startswith("vllm.")}


def run_model(name: str, dtype: torch.dtype, form: str, inner: str = "eager"):
    make, _ = MODELS[name]
    torch.manual_seed(0)
    model = make().to(dtype)
    torch._dynamo.reset()  # a fresh compile per test (Dynamo caches by code object)
    before = backend.RESULTS.count
    compiled = torch.compile(
        model, backend="vllm_xdsl", dynamic=True if form == "dynamic" else None,
        options={"inner": inner, "strict": True},
    )
    errors = []
    with torch.no_grad():
        for t in TOKENS:
            x = torch.randn(t, HIDDEN, dtype=dtype)
            if form == "mark_dynamic":
                torch._dynamo.mark_dynamic(x, 0)
            got, want = compiled(x).float(), model(x).float()
            tol = TOL[dtype]
            errors.append(((got - want).abs() - (tol + tol * want.abs())).max().item())
    return backend.RESULTS.since(before), errors


CASES = [
    pytest.param(name, dtype, form, marks=[pytest.mark.xfail(strict=True, reason=FUSED_ADD_NOTE)]
                 if (name, dtype) in XFAIL else [])
    for name in MODELS
    for dtype, form in ((torch.bfloat16, "dynamic"), (torch.float16, "mark_dynamic"))
]


@pytest.mark.parametrize(("name", "dtype", "form"), CASES)
def test_matches_eager_with_one_compile(name: str, dtype: torch.dtype, form: str) -> None:
    results, errors = run_model(name, dtype, form)
    assert len(results) == 1, f"expected one compile for {TOKENS} tokens, got {len(results)}"
    stages = {s.name: s for s in results[0].stages}
    assert semantic(stages["raise-native"].op_counts) == MODELS[name][1]
    # On the CPU every semantic op is lowered (native decomposition or a provider op).
    assert semantic(stages["lower-dispatch"].op_counts) == {}
    assert results[0].report is not None and "->" in results[0].report
    assert max(errors) <= 0, f"max excess over the tolerance: {max(errors)}"


def test_view_between_norm_and_quant_fuses() -> None:
    results, _ = run_model("norm_view_quant", torch.bfloat16, "dynamic")
    stages = {s.name: s for s in results[0].stages}
    assert semantic(stages["fuse-norm-quant"].op_counts) == {"vllm.rms_norm_quant": 1}


# fp8 models are left out here: plain Inductor itself differs from eager by more than the
# tolerance on them (its arithmetic flips fp8 roundings; measured, same with no passes).
@pytest.mark.parametrize("name", ["mlp_silu_mul", "gemma_norm"])
def test_inductor_inner(name: str) -> None:
    results, errors = run_model(name, torch.float16, "dynamic", inner="inductor")
    assert len(results) == 1
    assert max(errors) <= 0, f"max excess over the tolerance: {max(errors)}"
