"""HF transformers decoders from tiny random configs (config objects only: nothing is
downloaded), and their sites.

Site counts come from running the eager model with forward hooks (the model's own
structure, independent of the passes):
- norm: calls of modules whose class is an `*RMSNorm` (input/post-attention norms, Gemma2/3's
  pre/post-feedforward norms, Qwen3/Gemma3's q/k norms, the final norm);
- act: calls of the activation modules of `transformers.activations` (ACT2FN). In every
  architecture here each one is the gate of a GLU: `act(gate) * up` in the MLPs, in
  Qwen2Moe's shared expert, and once per MoE block in the experts (grouped_mm
  implementation: all routed tokens in one tensor);
- residual: two per decoder layer (one layer: it has both kinds of add). Every layer adds the attention output to the residual
  and normalises the sum (post_attention_layernorm; Gemma2/3: pre_feedforward_layernorm),
  then adds the MLP output and the next layer's input_layernorm (or the final norm)
  normalises that sum. The first input_layernorm reads the embeddings: no add.
- quant, pairs: none (unquantized models).
`sites.graph_sites` cross-checks norm and residual on the captured aten graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import transformers
from torch import nn

SEED = 0
TOKENS = 7  # an odd token count
VOCAB = 128

COMMON: dict[str, Any] = dict(
    vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
    pad_token_id=0, initializer_range=0.1, tie_word_embeddings=False,
)


@dataclass(frozen=True)
class Arch:
    config: str  # transformers config class
    model: str  # transformers causal-LM class
    extra: dict[str, Any] = field(default_factory=dict)


ARCHS: dict[str, Arch] = {
    "llama": Arch("LlamaConfig", "LlamaForCausalLM"),
    "qwen2": Arch("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": Arch("Qwen3Config", "Qwen3ForCausalLM"),
    "mistral": Arch("MistralConfig", "MistralForCausalLM"),
    "gemma": Arch("GemmaConfig", "GemmaForCausalLM"),
    # Gemma2/3 do not support SDPA in transformers 5.24: their own eager attention.
    "gemma2": Arch("Gemma2Config", "Gemma2ForCausalLM", {"attn_implementation": "eager"}),
    "gemma3": Arch("Gemma3TextConfig", "Gemma3ForCausalLM", {"attn_implementation": "eager"}),
    "phi3": Arch("Phi3Config", "Phi3ForCausalLM"),
    "qwen2moe": Arch("Qwen2MoeConfig", "Qwen2MoeForCausalLM", {
        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 64, "experts_implementation": "grouped_mm"}),
    "mixtral": Arch("MixtralConfig", "MixtralForCausalLM", {
        "num_local_experts": 4, "num_experts_per_tok": 2,
        "experts_implementation": "grouped_mm"}),
}


class Logits(nn.Module):
    """The causal LM as a function of token ids to logits (no KV cache)."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=ids, use_cache=False).logits


def build_lm(arch: str, dtype: torch.dtype, **overrides: Any) -> nn.Module:
    """A randomly initialised causal LM (seeded); norm weights perturbed so that the
    weight multiply is not a multiplication by one."""
    spec = ARCHS[arch]
    config = getattr(transformers, spec.config)(**{**COMMON, **spec.extra, **overrides})
    torch.manual_seed(SEED)
    lm = getattr(transformers, spec.model)(config)
    with torch.no_grad():
        for module in lm.modules():
            if type(module).__name__.endswith("RMSNorm"):
                weight = getattr(module, "weight", None)
                if isinstance(weight, torch.Tensor):
                    weight.add_(0.1 * torch.randn_like(weight))
    return lm.to(dtype).eval()


def token_ids(batch: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, TOKENS), generator=torch.Generator().manual_seed(SEED))


def is_norm(module: nn.Module) -> bool:
    return type(module).__name__.endswith("RMSNorm")


def is_activation(module: nn.Module) -> bool:
    return type(module).__module__ == "transformers.activations"


class CallCounter:
    """Counts forward calls of the modules that `predicate` selects (forward hooks)."""

    def __init__(self, model: nn.Module, predicates: dict[str, Any]) -> None:
        self.counts = dict.fromkeys(predicates, 0)
        self._handles = []
        for module in model.modules():
            for key, predicate in predicates.items():
                if predicate(module):
                    self._handles.append(module.register_forward_hook(self._hook(key)))

    def _hook(self, key: str) -> Any:
        def hook(*_: Any) -> None:
            self.counts[key] += 1
        return hook

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def decoder_layers(lm: nn.Module) -> int:
    config: Any = lm.config
    return int(config.num_hidden_layers)
