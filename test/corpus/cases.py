"""Every case of the corpus: (family, model or form, dtype, dynamic shapes) -> how to build
it."""

from __future__ import annotations

import dataclasses
import functools

import torch

from corpus import ct, hf, vllm_forms
from corpus.harness import Built, Case
from corpus.sites import Sites

DTYPES = (torch.float32, torch.bfloat16)
# Quantized checkpoints run in bf16; the stock forward (16 graphs, ~25 s a case on the
# loaded CI machine) for one fp8 and one int8 preset: its graph breaks are the same for all.
CT_DTYPES = (torch.bfloat16,)
CT_STOCK_PRESETS = ("FP8", "W8A8")
# A batch above 1 under dynamic=True: Dynamo specializes size-1 dims, so only then are both
# leading dims of the activations symbolic ([s0, s1, H]). The per-token presets (a scale
# per row of those dims, reshaped back from the op's [s0*s1, 1]), fused, one case each.
BATCH = 2
CT_BATCH_PRESETS = ("FP8_DYNAMIC", "W8A8")


def _llama_like_sites(lm: torch.nn.Module, ids: torch.Tensor, quant: int = 0,
                      pairs: int = 0) -> Sites:
    """Norms and acts by module calls in one eager forward, two residual adds per decoder
    layer (corpus.hf explains why)."""
    counter = hf.CallCounter(lm, {"norm": hf.is_norm, "act": hf.is_activation})
    with torch.no_grad():
        lm(input_ids=ids, use_cache=False)
    counter.remove()
    return Sites(norm=counter.counts["norm"], residual=2 * hf.decoder_layers(lm),
                 act=counter.counts["act"], quant=quant, pairs=pairs)


def build_hf(arch: str):
    def build(dtype: torch.dtype) -> Built:
        lm, ids = hf.build_lm(arch, dtype), hf.token_ids()
        return Built(hf.Logits(lm), (ids,), _llama_like_sites(lm, ids), token_dims=(1,))
    return build


def build_ct(preset: str, mode: str, batch: int = 1):
    def build(dtype: torch.dtype) -> Built:
        lm, ids = ct.build_quantized_llama(preset, mode, dtype), hf.token_ids(batch)
        if mode == "stock":  # graphs reused across Linears: no per-site totals
            return Built(hf.Logits(lm), (ids,), None, token_dims=(1,))
        sites = _llama_like_sites(lm, ids, *ct.count_quant_sites(lm, ids))
        return Built(hf.Logits(lm), (ids,), sites, token_dims=(1,))
    return build


def _cases() -> dict[str, Case]:
    cases = [Case("hf", arch, dt, build_hf(arch)) for arch in hf.ARCHS for dt in DTYPES]
    cases += [Case("ct", f"ct-{preset}-{mode}", dt, build_ct(preset, mode))
              for preset in ct.PRESETS for mode in ct.MODES for dt in CT_DTYPES
              if mode == "fused" or preset in CT_STOCK_PRESETS]
    forms = [Case("vllm", form, dt, functools.partial(vllm_forms.build_form, form))
             for form in vllm_forms.FORMS for dt in DTYPES]
    batched = [Case("ct", f"ct-{preset}-fused-batch{BATCH}", dt, build_ct(preset, "fused", BATCH),
                    shapes="all") for preset in CT_BATCH_PRESETS for dt in CT_DTYPES]
    # Each case with its token dim marked and under dynamic=True, adjacent; the batched ones
    # under dynamic=True only (with the token dim marked the batch is static).
    both = [c for base in cases for c in (base, dataclasses.replace(base, shapes="all"))]
    both += batched
    both += [c for base in forms for c in (base, dataclasses.replace(base, shapes="all"))]
    return {c.key: c for c in both}


# dynamic=True compiles take about twice as long (every dim symbolic): every
# compressed-tensors and vLLM-form case (quants, whose constants dynamic=True spells
# differently), and of the HF models one case per feature the raise patterns see: both
# residual-add variants (llama f32 and bf16), q/k norms (qwen3), Gemma's `1 + w` norm,
# Phi3's fused gate_up, the MoE experts and shared expert (qwen2moe). The others:
# bench/corpus_table.py --dynamic-all.
DYNAMIC_HF = {("llama", torch.float32), ("llama", torch.bfloat16), ("qwen3", torch.bfloat16),
              ("gemma", torch.bfloat16), ("phi3", torch.bfloat16), ("qwen2moe", torch.bfloat16)}
# Left to --dynamic-all too, as nothing else of the corpus's checks differs there (and each
# takes 25-45 s): W8A8's stock forward under dynamic=True, whose activations are the fused
# forward's (also measured under dynamic=True) and whose in-graph weight quants keep static
# shapes and a lifted int8 range (fp8's range becomes `aten.scalar_tensor(448.0)` there:
# ct-FP8-stock stays); FP8_DYNAMIC's batch, whose per-token scale takes the reshape of W8A8's
# (test_raise_quant_sources checks both presets' reshape on a norm and a Linear).
DYNAMIC_SKIPPED = {"ct-W8A8-stock/bf16/dynamic", f"ct-FP8_DYNAMIC-fused-batch{BATCH}/bf16/dynamic"}


def _in_corpus(case: Case) -> bool:
    if case.key in DYNAMIC_SKIPPED:
        return False
    return case.shapes == "token" or case.family != "hf" or (case.name, case.dtype) in DYNAMIC_HF


BOTH_SHAPES = _cases()  # every case under both kinds of dynamic shapes (the batched: one)
CASES = {key: case for key, case in BOTH_SHAPES.items() if _in_corpus(case)}
