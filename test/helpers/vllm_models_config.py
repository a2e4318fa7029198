"""Tiny random-weight Hugging Face checkpoints of the architectures vLLM's CPU build runs.

One place for their shapes so the side-by-side benchmark and the in-vLLM tests build the
same models: hidden 128, 2 layers, 4 heads of 32, vocabulary 256, bf16.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

COMMON: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "vocab_size": 256,
    "max_position_embeddings": 512,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}

# name -> (transformers config class, model class, overrides of COMMON)
MODELS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": None}),
    # vLLM's Gemma models have no lm_head of their own (always tied to the embedding):
    # an untied checkpoint's lm_head.weight fails to load.
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"tie_word_embeddings": True}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",
               {"sliding_window": 256, "tie_word_embeddings": True}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM",
               {"sliding_window": 256, "tie_word_embeddings": True}),
    # Phi3Config's pad token (32000) lies outside the tiny vocabulary.
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0}),
    "mixtral": (
        "MixtralConfig",
        "MixtralForCausalLM",
        {"num_local_experts": 4, "num_experts_per_tok": 2},
    ),
    "qwen2_moe": (
        "Qwen2MoeConfig",
        "Qwen2MoeForCausalLM",
        {
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 128,
            "shared_expert_intermediate_size": 256,
        },
    ),
}


def expected_sites(name: str) -> dict[str, int]:
    """The norm, residual-add and act-and-mul sites of one forward of vLLM's model `name`
    (vllm/model_executor/models/<name>.py), counted from the config as the corpus counts
    its HF models (test/corpus/hf.py):
    - norm: two per layer (input, post-attention), Qwen3/Gemma3's q and k norms, Gemma2/3's
      pre- and post-feedforward norms, and the final norm;
    - residual: two per layer: every norm that vLLM calls with a residual (each layer's
      input norm but the first, the post-attention norm or Gemma2/3's pre-feedforward norm,
      and the final norm) adds it first;
    - act: one SiluAndMul / GeluAndMul per dense MLP (Qwen2Moe's shared expert is one).
      MoE experts run inside vLLM's CPU kernel (`cpu_fused_moe`): no act site in the graph,
      so Mixtral has none.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    layers = COMMON["num_hidden_layers"]
    per_layer = 2 + 2 * (name in ("qwen3", "gemma3")) + 2 * (name in ("gemma2", "gemma3"))
    return {"norm": layers * per_layer + 1, "residual": 2 * layers,
            "act": 0 if name == "mixtral" else layers}


def write_checkpoint(name: str, directory: Path, seed: int = 0) -> Path:
    """Save the random checkpoint of model `name` under `directory` (reused when present)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    directory = Path(directory)
    if (directory / "config.json").exists():
        return directory
    import torch
    import transformers

    config_cls, model_cls, overrides = MODELS[name]
    config = getattr(transformers, config_cls)(**{**COMMON, **overrides})
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).to(torch.bfloat16)
    model.save_pretrained(directory)
    return directory
