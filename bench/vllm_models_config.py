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
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {}),
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
