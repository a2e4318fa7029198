"""Tiny random-weight Hugging Face checkpoints of the architectures vLLM's CPU build runs.

One place for their shapes so the side-by-side benchmark and the in-vLLM tests build the
same models: hidden 128, 2 layers, 4 heads of 32, vocabulary 256, bf16.

INT8 adds compressed-tensors W8A8 int8 Llamas written by hand (`write_int8_checkpoint`):
int8 weights with per-channel `weight_scale`, and per-tensor `input_scale` for static
activations. vLLM's CPU kernel (`CPUInt8ScaledMMLinearKernel`) takes its AMX path, the quant
inside `_C.int8_scaled_mm_with_quant`, where K % 32 == 0 and N % 16 == 0
(`model_executor/layers/utils.py::check_cpu_sgl_kernel`), and otherwise quantizes with
`_C.static_scaled_int8_quant` / `_C.dynamic_scaled_int8_quant` and multiplies with
`_C.onednn_scaled_mm`: hidden 136 and intermediate 264 put every projection (K = 136, 128
or 264, N = 3 * 128, 136, 2 * 264 or 136) off the AMX rule, hidden 128 / intermediate 256
every one on it.
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


ONEDNN_SHAPES: dict[str, Any] = {"hidden_size": 136, "intermediate_size": 264}
"""No projection meets the AMX rule (module doc): each one quantizes in its own `_C` call."""

# name -> (activations dynamic per token, vLLM's kernel path, overrides of COMMON)
INT8: dict[str, tuple[bool, str, dict[str, Any]]] = {
    "llama_int8_static": (False, "onednn", ONEDNN_SHAPES),
    "llama_int8_dynamic": (True, "onednn", ONEDNN_SHAPES),
    "llama_int8_amx": (True, "amx", {}),
}
INT8_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


EAGER_ROUNDING = {"TORCHINDUCTOR_EMULATE_PRECISION_CASTS": "1"}
"""Inductor keeps every rounding of the graph (docs/OPS.md, "A norm + int8 quant compiled
by Inductor"): without it, a fused norm + int8 quant lowered into one Inductor kernel reads
the norm unrounded, where plain vLLM's `_C` quant reads it stored in bf16, and greedy tokens
of these random models part after a few steps. Plain vLLM's tokens are the same with and
without it (measured)."""


def engine_env(name: str) -> dict[str, str]:
    """The environment an engine of model `name` runs in, plain and ours alike."""
    return dict(EAGER_ROUNDING) if name in INT8 and INT8[name][1] == "onednn" else {}


def int8_quant_sites(name: str) -> int:
    """The activation quants in the graph of one forward of INT8 model `name`: on the oneDNN
    path one per projection vLLM runs (q, k, v merged into one; gate and up into one), four
    per layer; on the AMX path none (each inside its GEMM)."""
    if name not in INT8:
        raise ValueError(f"unknown int8 model {name!r}; known: {', '.join(INT8)}")
    return 4 * COMMON["num_hidden_layers"] if INT8[name][1] == "onednn" else 0


def write_int8_checkpoint(name: str, directory: Path, seed: int = 0,
                          shapes: dict[str, Any] | None = None) -> Path:
    """A compressed-tensors W8A8 int8 Llama (INT8[name]) under `directory` (reused when
    present): the random bf16 Llama's projections rounded to int8 per output channel
    (`weight_scale = absmax / 127`), and for static activations one `input_scale` per
    projection (the same for the projections vLLM merges, which it reduces to their max).
    `shapes` overrides the config last (the benchmarks' larger models)."""
    if name not in INT8:
        raise ValueError(f"unknown int8 model {name!r}; known: {', '.join(INT8)}")
    directory = Path(directory)
    if (directory / "config.json").exists():
        return directory
    import json

    import torch
    import transformers
    from safetensors.torch import save_file

    dynamic, _, overrides = INT8[name]
    config = transformers.LlamaConfig(**{**COMMON, **overrides, **(shapes or {})})
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    tensors: dict[str, torch.Tensor] = {}
    for key, value in model.state_dict().items():
        module, _, leaf = key.rpartition(".")
        if leaf == "weight" and module.rsplit(".", 1)[-1] in INT8_PROJECTIONS:
            w = value.float()
            scale = (w.abs().amax(-1, keepdim=True) / 127.0).clamp(min=1e-8)
            tensors[key] = torch.round(w / scale).clamp(-128, 127).to(torch.int8)
            tensors[f"{module}.weight_scale"] = scale
            if not dynamic:  # activations of these random models stay within a few units
                tensors[f"{module}.input_scale"] = torch.tensor([4.0 / 127.0])
        else:
            tensors[key] = value.contiguous()
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(directory / "model.safetensors"))
    int8 = {"num_bits": 8, "type": "int", "symmetric": True}
    quant = {
        "quant_method": "compressed-tensors",
        "format": "int-quantized",
        "quantization_status": "compressed",
        "ignore": ["lm_head"],
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {**int8, "strategy": "channel", "dynamic": False},
            "input_activations": {**int8, "strategy": "token" if dynamic else "tensor",
                                  "dynamic": dynamic},
        }},
    }
    config_dict = config.to_dict()
    config_dict["quantization_config"] = quant
    (directory / "config.json").write_text(json.dumps(config_dict, indent=1))
    return directory


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


def write_checkpoint(name: str, directory: Path, seed: int = 0,
                     shapes: dict[str, Any] | None = None) -> Path:
    """Save the random checkpoint of model `name` (MODELS or INT8) under `directory` (reused
    when present); `shapes` overrides the config last."""
    if name in INT8:
        return write_int8_checkpoint(name, directory, seed, shapes)
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    directory = Path(directory)
    if (directory / "config.json").exists():
        return directory
    import torch
    import transformers

    config_cls, model_cls, overrides = MODELS[name]
    config = getattr(transformers, config_cls)(**{**COMMON, **overrides, **(shapes or {})})
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).to(torch.bfloat16)
    model.save_pretrained(directory)
    return directory
