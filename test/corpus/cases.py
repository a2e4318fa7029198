"""Every case of the corpus: (family, model or form, dtype) -> how to build it."""

from __future__ import annotations

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


def build_ct(preset: str, mode: str):
    def build(dtype: torch.dtype) -> Built:
        lm, ids = ct.build_quantized_llama(preset, mode, dtype), hf.token_ids()
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
    cases += [Case("vllm", form, dt, functools.partial(vllm_forms.build_form, form))
              for form in vllm_forms.FORMS for dt in DTYPES]
    return {c.key: c for c in cases}


CASES = _cases()
