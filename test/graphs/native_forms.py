"""The decompositions that raise-native must recognise, written as model code writes them.

Each module is a small `nn.Module` whose forward is one form (HF, vLLM-native, Gemma, the
slice/split/chunk SiLU-and-mul, ...). test_raise_native.py compiles them with
torch.compile (dynamic=True and mark_dynamic), imports the real aten graph, runs the pass
and compares the raised graph with the original one. `python test/graphs/capture.py`
prints the captured graphs and their IR.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

FP8 = torch.float8_e4m3fn


class LlamaRMSNorm(nn.Module):
    """transformers' LlamaRMSNorm: weight multiply after the cast back."""

    def __init__(self, hidden: int, eps: float = 1e-6, sqrt_div: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps, self.sqrt_div = eps, sqrt_div

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dt = x.dtype
        xf = x.to(torch.float32)
        var = xf.pow(2).mean(-1, keepdim=True)
        if self.sqrt_div:
            xf = xf / torch.sqrt(var + self.eps)
        else:
            xf = xf * torch.rsqrt(var + self.eps)
        return self.weight * xf.to(dt)


class WeightBeforeCastNorm(LlamaRMSNorm):
    """`(weight * xf).to(dtype)`: the weight multiply in fp32, before the cast back."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (self.weight * xf).to(x.dtype)


class NoWeightNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class GemmaRMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.float())).type_as(x)


class ResidualNorm(nn.Module):
    """HF decoder: `h = x + residual`, then the norm; the sum is the next residual."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.norm = LlamaRMSNorm(hidden, eps)

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x + r
        return self.norm(h), h * 2


class VllmFusedAddNorm(nn.Module):
    """vLLM's native fused_add_rms_norm: the sum in fp32, the norm of the unrounded sum."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dt = x.dtype
        s = x.to(torch.float32) + r.to(torch.float32)
        residual = s.to(dt)
        var = s.pow(2).mean(dim=-1, keepdim=True)
        y = (s * torch.rsqrt(var + self.eps)).to(dt) * self.weight
        return y, residual


class StaticFp8Quant(nn.Module):
    """`clamp(x / scale)` (HF-style) or vLLM's `x.float() * scale.reciprocal()`."""

    def __init__(self, hidden: int, reciprocal: bool = False) -> None:
        super().__init__()
        self.gain = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.register_buffer("scale", torch.tensor([0.0173]))
        self.reciprocal = reciprocal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.gain  # a producer with a static hidden size, as a norm would be
        fmax = torch.finfo(FP8).max
        if self.reciprocal:
            y = x.to(torch.float32) * self.scale.reciprocal()
        else:
            y = x / self.scale
        return y.clamp(-fmax, fmax).to(FP8)


class DynamicPerTokenFp8Quant(nn.Module):
    """vLLM's native per-token quant (`max(dim)` + reciprocal) or `amax` + divide."""

    def __init__(self, hidden: int, vllm_form: bool = True, scale_ub: bool = False) -> None:
        super().__init__()
        self.gain = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.vllm_form = vllm_form
        self.register_buffer("scale_ub", torch.tensor([2.5]) if scale_ub else None)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x * self.gain
        fmax = torch.finfo(FP8).max
        if self.vllm_form:
            x_max, _ = x.abs().max(dim=-1)
            x_max = x_max.unsqueeze(-1).to(torch.float32)
            if self.scale_ub is not None:
                x_max = x_max.clamp(max=self.scale_ub)
            scale = (x_max / fmax).clamp(min=1.0 / (fmax * 512.0))
            out = x.to(torch.float32) * scale.reciprocal()
        else:
            a = x.float().abs().amax(dim=-1, keepdim=True)
            scale = torch.clamp(a / fmax, min=1.0 / (fmax * 512.0))
            out = x.float() / scale
        return out.clamp(-fmax, fmax).to(FP8), scale


class SiluAndMul(nn.Module):
    def __init__(self, hidden: int, form: str = "slice") -> None:
        super().__init__()
        self.gain = nn.Parameter(1.0 + 0.1 * torch.randn(2 * hidden))
        self.form = form

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.gain
        d = x.shape[-1] // 2
        if self.form == "slice":
            return F.silu(x[..., :d]) * x[..., d:]
        if self.form == "split":
            g, u = x.split(d, dim=-1)
        else:
            g, u = x.chunk(2, dim=-1)
        return F.silu(g) * u


class NormThenQuant(nn.Module):
    """A norm feeding a static fp8 quant (vLLM-style f32 scale): both raised."""

    def __init__(self, hidden: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm = LlamaRMSNorm(hidden, eps)
        self.register_buffer("scale", torch.tensor([0.0173]), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x)
        q = (y.to(torch.float32) * self.scale.reciprocal()).clamp(-448.0, 448.0)
        return q.to(FP8)
