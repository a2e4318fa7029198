"""raise-native on the bundled decoder layers (HF Llama, Qwen3 q/k norms, Gemma norms,
SiLU-and-mul MLP, fp8 static-quantized linears, a view between attention and o_proj's
quant): the expected semantic ops appear, and the raised graph matches the original one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "graphs"))

from raise_harness import compile_and_run  # noqa: E402

from vllm_xdsl.models import DecoderConfig, DecoderLayer  # noqa: E402

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32

# (config, dtype, form, expected counts)
CASES = {
    # HF Llama in bf16: the input norm, the bf16-rounded residual add + norm as
    # fused_add_rms_norm{rounded_sum} (exact), 4 fp8 input quants (Inductor divides in f32),
    # 1 SiLU-and-mul.
    "llama_bf16": (DecoderConfig(), BF16, "dynamic",
                   {"rms_norm": 1, "fused_add_rms_norm": 1, "static_scaled_fp8_quant": 4,
                    "silu_and_mul": 1}),
    # Qwen3 q/k norms over head_dim (rank-3 inputs) with Gemma norms, f16.
    "qwen3_gemma_f16": (DecoderConfig(qk_norm=True, norm="gemma"), F16, "mark_dynamic",
                        {"rms_norm": 3, "fused_add_rms_norm": 1,
                         "static_scaled_fp8_quant": 4, "silu_and_mul": 1}),
    # f32: the two sums coincide; the default spelling.
    "qwen3_f32": (DecoderConfig(qk_norm=True), F32, "dynamic",
                  {"rms_norm": 3, "fused_add_rms_norm": 1, "static_scaled_fp8_quant": 4,
                   "silu_and_mul": 1}),
    "llama_no_fp8_bf16": (DecoderConfig(fp8=False), BF16, "mark_dynamic",
                          {"rms_norm": 1, "fused_add_rms_norm": 1, "silu_and_mul": 1}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_decoder_layer(name: str) -> None:
    """The raised layer computes bit for bit what the layer computes (the rounded residual
    add is an exact variant)."""
    cfg, dt, form, counts = CASES[name]
    torch.manual_seed(0)
    model = DecoderLayer(cfg).to(dt)
    run = compile_and_run(model, lambda t: (torch.randn(t, cfg.hidden, dtype=dt),), form,
                          kinds=("model",))
    assert len(run.after) == 1
    assert dict(run.counts) == counts, run.after[0]
    fused = [ln for ln in run.after[0].splitlines() if "vllm.fused_add_rms_norm" in ln]
    assert all(("rounded_sum" in ln) == (dt != F32) for ln in fused), fused
    assert run.calls == 3 and run.problems == [], run.problems
    assert run.bitwise == [True] * 3
