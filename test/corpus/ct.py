"""compressed-tensors presets on a tiny HF Llama (fake quantization, as llm-compressor
calibrates and evaluates models), and their sites.

Two forwards per preset:
- "stock": compressed-tensors' own quantized forward (`set_forward_quantized`). It
  fake-quantizes the input and the weight, then runs `Linear.forward` under
  `patch_attr(weight, "data", ...)`, which Dynamo cannot trace: one graph break per Linear.
  No fusion can span that break.
- "fused": the same arithmetic in one graph, to measure fusion: compressed-tensors'
  `forward_quantize` on the activation, then `F.linear` with the weight fake-quantized
  once beforehand (with the same `forward_quantize`).

Sites (one decoder layer, lm_head left unquantized as the presets' users do):
- norm, residual, act: as for HF Llama (corpus.hf): 3, 2, 1;
- quant: calls of Linears whose scheme quantizes the input (q, k, v, o, gate, up, down: 7);
- pairs: q/k/v read input_layernorm's output, gate/up post_attention_layernorm's, down the
  act-and-mul's: 6 (o_proj reads the attention).
The stock forward gets no totals (corpus.harness.Built): Dynamo compiles one graph per
Linear call site shape and reuses it (q/k/v share one), so raised ops are per graph; its
weight fake-quants are in those graphs too.

Scales are initialised as calibration would: weights from their own min/max, static input
scales from the min/max of the inputs seen in one eager forward (both through
compressed-tensors' `calculate_qparams`).
"""

from __future__ import annotations

import types
from typing import Any

import torch
import torch.nn.functional as F
from compressed_tensors.quantization import (
    QuantizationConfig,
    QuantizationStrategy,
    apply_quantization_config,
    forward_quantize,
    preset_name_to_scheme,
)
from compressed_tensors.quantization.utils import calculate_qparams
from torch import nn

from corpus import hf

PRESETS = ("FP8", "FP8_DYNAMIC", "W8A8", "FP8_BLOCK")
MODES = ("stock", "fused")
# FP8_BLOCK quantizes activations in groups of 128 and weights in 128x128 blocks.
LLAMA = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32)
PAIR_INPUTS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj")


def _min_max(value: torch.Tensor, args: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Min and max over what one scale covers (weights: tensor, channel or block)."""
    if args.strategy == QuantizationStrategy.TENSOR:
        return torch.aminmax(value)
    if args.strategy == QuantizationStrategy.CHANNEL:
        return value.amin(-1, keepdim=True), value.amax(-1, keepdim=True)
    if args.strategy == QuantizationStrategy.BLOCK:
        bh, bw = args.block_structure
        rows, cols = value.shape
        padded = F.pad(value, (0, 0, 0, -rows % bh))
        blocks = padded.reshape(padded.shape[0] // bh, bh, cols // bw, bw)
        return blocks.amin(dim=(1, 3)), blocks.amax(dim=(1, 3))
    raise ValueError(f"corpus: no calibration for strategy {args.strategy}")


def _quantized_linears(lm: nn.Module) -> list[tuple[str, Any]]:
    """(name, Linear) of the Linears compressed-tensors gave a scheme (its attributes
    `quantization_scheme`, `weight_scale`, ... are dynamic: typed Any)."""
    return [(n, m) for n, m in lm.named_modules()
            if isinstance(m, nn.Linear) and getattr(m, "quantization_scheme", None) is not None]


def _calibrate(lm: nn.Module, ids: torch.Tensor) -> None:
    linears = _quantized_linears(lm)
    with torch.no_grad():
        for _, m in linears:
            scale, zero_point = calculate_qparams(
                *_min_max(m.weight, m.quantization_scheme.weights), m.quantization_scheme.weights)
            m.weight_scale.copy_(scale.reshape(m.weight_scale.shape))
            if hasattr(m, "weight_zero_point"):
                m.weight_zero_point.copy_(zero_point.reshape(m.weight_zero_point.shape))
        static = [(n, m) for n, m in linears if hasattr(m, "input_scale")]
        seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        hooks = [m.register_forward_pre_hook(
            lambda _m, a, n=n: seen.__setitem__(n, torch.aminmax(a[0]))) for n, m in static]
        for _, m in linears:
            m.quantization_enabled = False
        lm(input_ids=ids, use_cache=False)
        for _, m in linears:
            m.quantization_enabled = True
        for h in hooks:
            h.remove()
        for n, m in static:
            scale, _ = calculate_qparams(*seen[n], m.quantization_scheme.input_activations)
            m.input_scale.copy_(scale.reshape(m.input_scale.shape))


def _fused_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    x = forward_quantize(self, x, "input", self.quantization_scheme.input_activations)
    return F.linear(x, self.weight, self.bias)


def build_quantized_llama(preset: str, mode: str, dtype: torch.dtype) -> nn.Module:
    lm = hf.build_lm("llama", dtype, **LLAMA)
    scheme = preset_name_to_scheme(preset, ["Linear"])
    config = QuantizationConfig(config_groups={"group_0": scheme}, ignore=["lm_head"])
    apply_quantization_config(lm, config, show_progress=False)
    _calibrate(lm, hf.token_ids())
    if mode == "fused":
        with torch.no_grad():
            for _, m in _quantized_linears(lm):
                m.weight.copy_(forward_quantize(m, m.weight, "weight", m.quantization_scheme.weights))
                m.forward = types.MethodType(_fused_forward, m)
    return lm


def count_quant_sites(lm: nn.Module, ids: torch.Tensor) -> tuple[int, int]:
    """(input quants, pairs) from one eager forward: calls of Linears that quantize their
    input, and of those the ones that read a norm or an act-and-mul output (by their place
    in the Llama decoder layer)."""
    calls: list[str] = []
    hooks = [m.register_forward_pre_hook(lambda *_, n=n: calls.append(n))
             for n, m in _quantized_linears(lm)
             if m.quantization_scheme.input_activations is not None]
    with torch.no_grad():
        lm(input_ids=ids, use_cache=False)
    for h in hooks:
        h.remove()
    return len(calls), sum(n.rsplit(".", 1)[-1] in PAIR_INPUTS for n in calls)
