"""raise-native on graphs that torch.compile really produces (dynamic=True and
mark_dynamic): the expected semantic ops appear, and the raised graph computes what the
original graph computed (bit for bit with exact=true, within OPS.md otherwise)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "graphs"))

import native_forms as forms  # noqa: E402
from raise_harness import compile_and_run  # noqa: E402

H = 64
BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
NORM, FUSED = "rms_norm", "fused_add_rms_norm"
STATIC, PER_TOKEN, SILU = "static_scaled_fp8_quant", "dynamic_per_token_scaled_fp8_quant", "silu_and_mul"


def _one(t: int, dt: torch.dtype):
    return (torch.randn(t, H, dtype=dt) * 3,)


def _two(t: int, dt: torch.dtype):
    return (torch.randn(t, H, dtype=dt), torch.randn(t, H, dtype=dt))


def _wide(t: int, dt: torch.dtype):
    return (torch.randn(t, 2 * H, dtype=dt) * 2,)


def _f32_scale(model: torch.nn.Module) -> torch.nn.Module:
    model.scale = model.scale.float()  # vLLM keeps quant scales in f32
    return model


# name -> (make model, inputs, counts raised by default, counts raised with exact=true, kinds)
CASES = {
    "llama_norm": (lambda: forms.LlamaRMSNorm(H), _one, {NORM: 1}, {NORM: 1}, ("norm",)),
    "llama_norm_eps3e-7": (lambda: forms.LlamaRMSNorm(H, 3e-7), _one, {NORM: 1}, {NORM: 1}, ("norm",)),
    "sqrt_div_norm": (lambda: forms.LlamaRMSNorm(H, sqrt_div=True), _one, {NORM: 1}, {}, ("norm",)),
    "weight_before_cast": (lambda: forms.WeightBeforeCastNorm(H), _one, {NORM: 1}, {NORM: 1}, ("norm",)),
    "no_weight_norm": (lambda: forms.NoWeightNorm(H), _one, {NORM: 1}, {NORM: 1}, ("norm",)),
    "gemma_norm": (lambda: forms.GemmaRMSNorm(H), _one, {NORM: 1}, {NORM: 1}, ("norm",)),
    # The HF residual add: in f16/bf16 the rounded_sum variant (exact), in f32 the default.
    "residual_norm": (lambda: forms.ResidualNorm(H), _two, {FUSED: 1}, {FUSED: 1},
                      ("norm", "value")),
    "vllm_fused_add": (lambda: forms.VllmFusedAddNorm(H), _two, {FUSED: 1}, {FUSED: 1},
                       ("norm", "value")),
    # Every quant form is raised as its exact variant (docs/OPS.md "Variants"), so at
    # every level: `x / scale` divides (`div`), a bf16/f16 division rounds its quotient.
    "static_quant_div": (lambda: forms.StaticFp8Quant(H), _one, {STATIC: 1}, {STATIC: 1}, ()),
    "static_quant_reciprocal": (lambda: forms.StaticFp8Quant(H, reciprocal=True), _one,
                                None, None, ()),
    "static_quant_reciprocal_f32_scale": (lambda: forms.StaticFp8Quant(H, reciprocal=True), _one,
                                          {STATIC: 1}, {STATIC: 1}, ()),
    "static_quant_div_f32_scale": (lambda: forms.StaticFp8Quant(H), _one, {STATIC: 1},
                                   {STATIC: 1}, ()),
    "per_token_vllm": (lambda: forms.DynamicPerTokenFp8Quant(H), _one, {PER_TOKEN: 1},
                       {PER_TOKEN: 1}, ("value", "scales")),
    "per_token_scale_ub": (lambda: forms.DynamicPerTokenFp8Quant(H, scale_ub=True), _one,
                           {PER_TOKEN: 1}, {PER_TOKEN: 1}, ("value", "scales")),
    "per_token_amax_div": (lambda: forms.DynamicPerTokenFp8Quant(H, vllm_form=False), _one,
                           {PER_TOKEN: 1}, {PER_TOKEN: 1}, ("value", "scales")),
    # Inductor decomposes silu (exp, div): not bit-exact with aten.silu, so not in exact mode.
    "silu_slice": (lambda: forms.SiluAndMul(H, "slice"), _wide, {SILU: 1}, {}, ()),
    "silu_split": (lambda: forms.SiluAndMul(H, "split"), _wide, {SILU: 1}, {}, ()),
    "silu_chunk": (lambda: forms.SiluAndMul(H, "chunk"), _wide, {SILU: 1}, {}, ()),
    "norm_then_quant": (lambda: forms.NormThenQuant(H), _one, {NORM: 1, STATIC: 1},
                        {NORM: 1, STATIC: 1}, ("value",)),
}

# Counts that depend on the dtype (None above).
DTYPE_COUNTS = {
    # After model.to(dt) the scale is f16/bf16 and so is its reciprocal: a rounded scale,
    # which no variant describes (a variant's reciprocal is f32).
    "static_quant_reciprocal": {F32: {STATIC: 1}, F16: {}, BF16: {}},
}
EXACT_DTYPE_COUNTS = {
    "static_quant_reciprocal": {F32: {STATIC: 1}, F16: {}, BF16: {}},
}


# Every (dtype, form) pair with VLLM_XDSL_FULL_GRID=1; by default a cover of both lists.
FULL = os.environ.get("VLLM_XDSL_FULL_GRID") == "1"
ALL_PAIRS = [(dt, form) for dt in (BF16, F16, F32) for form in ("dynamic", "mark_dynamic")]
PAIRS = ALL_PAIRS if FULL else [(BF16, "dynamic"), (F16, "mark_dynamic"), (F32, "dynamic"),
                                (BF16, "mark_dynamic")]
EXACT_PAIRS = ALL_PAIRS if FULL else [(BF16, "mark_dynamic"), (F16, "dynamic"),
                                      (F32, "mark_dynamic")]


def _make(name: str, dt: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    model = CASES[name][0]().to(dt)
    if name == "per_token_scale_ub":
        model.scale_ub = model.scale_ub.float()
    return _f32_scale(model) if name == "norm_then_quant" or "f32_scale" in name else model


def _counts(name: str, dt: torch.dtype, exact: bool) -> dict[str, int]:
    _, _, default, strict, _ = CASES[name]
    table = EXACT_DTYPE_COUNTS if exact else DTYPE_COUNTS
    want = strict if exact else default
    return table[name][dt] if want is None else want


@pytest.mark.parametrize(("dt", "form"), PAIRS, ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_raised_ops_and_numerics(name: str, dt: torch.dtype, form: str) -> None:
    _, inputs, _, _, kinds = CASES[name]
    run = compile_and_run(_make(name, dt), lambda t: inputs(t, dt), form, kinds=kinds)
    assert len(run.after) == 1, "one compile serves every token count"
    assert dict(run.counts) == _counts(name, dt, exact=False), run.after[0]
    assert run.calls == 3 and run.problems == [], run.problems
    if not run.counts:
        assert run.after == run.before, "a graph with nothing to raise must stay unchanged"


@pytest.mark.parametrize(("dt", "form"), EXACT_PAIRS, ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_exact_mode_is_bitwise(name: str, dt: torch.dtype, form: str) -> None:
    _, inputs, _, _, kinds = CASES[name]
    run = compile_and_run(_make(name, dt), lambda t: inputs(t, dt), form, exact=True, kinds=kinds)
    assert dict(run.counts) == _counts(name, dt, exact=True), run.after[0]
    assert run.bitwise == [True] * 3


def test_dynamic_epsilon_is_a_runtime_operand() -> None:
    run = compile_and_run(_make("llama_norm", BF16), lambda t: _one(t, BF16), "dynamic")
    norm = next(line for line in run.after[0].splitlines() if "vllm.rms_norm" in line)
    assert "epsilon(%" in norm and "epsilon =" not in norm, norm


def test_dead_decomposition_is_removed() -> None:
    run = compile_and_run(_make("llama_norm", F16), lambda t: _one(t, F16), "mark_dynamic")
    body = run.after[0]
    for gone in ("aten::rsqrt", "aten::mean.dim", "aten::pow"):
        assert gone not in body, body


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("dt", [BF16, F16, F32], ids=str)
def test_rounded_residual_add_is_the_rounded_sum_variant(dt: torch.dtype, exact: bool) -> None:
    """The HF residual add in f16/bf16 becomes fused_add_rms_norm{rounded_sum}, bit-exact,
    at both levels (it is an exact variant); in f32 the default spelling."""
    run = compile_and_run(_make("residual_norm", dt), lambda t: _two(t, dt), "dynamic",
                          kinds=("norm", "value"), exact=exact)
    assert dict(run.counts) == {FUSED: 1}, run.after[0]
    fused = next(ln for ln in run.after[0].splitlines() if "vllm.fused_add_rms_norm" in ln)
    assert ("rounded_sum" in fused) == (dt != F32), fused
    assert run.bitwise == [True] * 3 and run.problems == [], run.problems
