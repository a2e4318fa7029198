"""A Llama-style decoder as HF writes it: RMSNorm in fp32 with the weight multiply after
the cast back, residual adds, SiLU-and-mul MLP, and linears whose inputs are fp8
static-quantized (emulated on the CPU as quant -> dequant -> matmul). Options give the
Qwen3 (q/k norms) and Gemma (`weight.float() + 1`) variants."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


@dataclass(frozen=True)
class DecoderConfig:
    hidden: int = 128
    intermediate: int = 256
    heads: int = 4
    layers: int = 2
    vocab: int = 256
    eps: float = 1e-6
    qk_norm: bool = False  # Qwen3: RMSNorm over head_dim of q and k
    norm: str = "llama"  # or "gemma"
    fp8: bool = True  # fp8 static-quantized linear inputs

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


class LlamaRMSNorm(nn.Module):
    """transformers' LlamaRMSNorm, verbatim in its arithmetic."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class GemmaRMSNorm(nn.Module):
    """Gemma's norm: weight stored as an offset from 1, applied in fp32."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        output = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


def make_norm(cfg: DecoderConfig, hidden: int) -> nn.Module:
    return GemmaRMSNorm(hidden, cfg.eps) if cfg.norm == "gemma" else LlamaRMSNorm(hidden, cfg.eps)


class Fp8Linear(nn.Module):
    input_scale: torch.Tensor  # a buffer

    """A linear whose input is fp8-quantized with a static per-tensor scale, in f32 as
    vLLM's native quant does (one rounding, f32 -> fp8), then dequantized for the matmul."""

    def __init__(self, in_features: int, out_features: int, fp8: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features**0.5)
        self.fp8 = fp8
        self.register_buffer("input_scale", torch.tensor([0.02]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fp8:
            scale = self.input_scale.float()
            q = torch.clamp(x.float() / scale, -FP8_MAX, FP8_MAX).to(FP8)
            x = (q.float() * scale).to(x.dtype)
        return F.linear(x, self.weight)


class Mlp(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.intermediate = cfg.intermediate
        self.gate_up_proj = Fp8Linear(cfg.hidden, 2 * cfg.intermediate, cfg.fp8)
        self.down_proj = Fp8Linear(cfg.intermediate, cfg.hidden, cfg.fp8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = self.gate_up_proj(x)
        d = self.intermediate
        return self.down_proj(F.silu(gate_up[..., :d]) * gate_up[..., d:])


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    inv_freq: torch.Tensor  # a buffer

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = cfg.heads, cfg.head_dim
        self.qkv_proj = Fp8Linear(cfg.hidden, 3 * cfg.hidden, cfg.fp8)
        self.o_proj = Fp8Linear(cfg.hidden, cfg.hidden, cfg.fp8)
        self.q_norm = make_norm(cfg, cfg.head_dim) if cfg.qk_norm else None
        self.k_norm = make_norm(cfg, cfg.head_dim) if cfg.qk_norm else None
        inv_freq = 1.0 / (10000 ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.shape[0]
        q, k, v = self.qkv_proj(x).view(tokens, 3, self.heads, self.head_dim).unbind(1)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        freqs = torch.outer(torch.arange(tokens, device=x.device).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype)[:, None, :], emb.sin().to(x.dtype)[:, None, :]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True
        )
        return self.o_proj(out.transpose(0, 1).reshape(tokens, -1))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.input_layernorm = make_norm(cfg, cfg.hidden)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = make_norm(cfg, cfg.hidden)
        self.mlp = Mlp(cfg)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        residual = hidden_states
        hidden_states = self.self_attn(self.input_layernorm(hidden_states))
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        return residual + hidden_states


class TinyDecoder(nn.Module):
    """Embedding, `layers` decoder layers, final norm and LM head: token ids -> logits."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = make_norm(cfg, cfg.hidden)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.norm(h))
