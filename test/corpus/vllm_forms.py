"""vLLM's own native forms (vLLM cannot be installed here), written as small modules that
compute what vLLM's `forward_native` code computes, read from vllm-project/vllm:

- `vllm/model_executor/layers/layernorm.py`: `RMSNorm.forward_native` (= `forward_static`),
  with and without `residual`: the sum in f32, `residual = sum.to(dtype)`, the norm of the
  unrounded f32 sum, cast back, then `* weight`;
- `vllm/model_executor/layers/quantization/input_quant_fp8.py`: `QuantFP8.forward_native`:
  static (`x.float() * scale.reciprocal()`, clamp, fp8), dynamic per-token (`x.abs().max(-1)`
  values, `unsqueeze(-1).float()`, optional `clamp(max=scale_ub)`, `/ FMAX`,
  `clamp(min=1/(FMAX*512))`), dynamic per-tensor (`x.abs().max()`), and
  `_quantize_group_native` (groups by `view`, absmax `/ FMAX`, ue8m0 `exp2(ceil(log2))`,
  `clamp(min=1/(FMAX*512))`, `x / scales`, column-major scales by transpose-contiguous-
  transpose);
- `vllm/model_executor/layers/activation.py`: `SiluAndMul` and `GeluAndMul` (`none`, `tanh`)
  natives: `act(x[..., :d]) * x[..., d:]`.

Each quant form is measured where vLLM's fusions see it: after an RMSNorm, after an RMSNorm
with residual, and after a SiLU-and-mul (sites: norm 2, residual 1, act 1, quant 3, pairs 3,
none for dynamic per-tensor, which cannot fuse).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from corpus.harness import Built
from corpus.sites import Sites

FP8 = torch.float8_e4m3fn
FMAX = torch.finfo(FP8).max
MIN_SCALE = 1.0 / (FMAX * 512.0)
TOKENS, HIDDEN, GROUP = 7, 128, 64
EPS = 1e-6
SEED = 0

QUANTS = ("static", "per_token", "per_token_ub", "per_tensor", "group", "group_ue8m0",
          "group_col")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor | None = None):
    """RMSNorm.forward_native (layernorm.py)."""
    orig_dtype = x.dtype
    x = x.to(torch.float32)
    if residual is not None:
        x = x + residual.to(torch.float32)
        residual = x.to(orig_dtype)
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    x = x * torch.rsqrt(variance + EPS)
    x = x.to(orig_dtype) * weight
    return x if residual is None else (x, residual)


def act_and_mul(x: torch.Tensor, act: str) -> torch.Tensor:
    """SiluAndMul / GeluAndMul(approximate) .forward_native (activation.py)."""
    d = x.shape[-1] // 2
    if act == "silu":
        return F.silu(x[..., :d]) * x[..., d:]
    return F.gelu(x[..., :d], approximate=act.removeprefix("gelu_") if "_" in act else "none") \
        * x[..., d:]


class QuantFP8(nn.Module):
    """QuantFP8.forward_native (input_quant_fp8.py) for one configuration."""

    scale: torch.Tensor | None
    scale_ub: torch.Tensor | None

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.register_buffer("scale", torch.tensor([0.02]) if kind == "static" else None)
        self.register_buffer("scale_ub", torch.tensor([1.5]) if kind == "per_token_ub" else None)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.kind.startswith("group"):
            return self._group(x)
        scale = self.scale
        if scale is None:
            if self.kind.startswith("per_token"):
                x_max, _ = x.abs().max(dim=-1)
                x_max = x_max.unsqueeze(-1).to(torch.float32)
                if self.scale_ub is not None:
                    x_max = x_max.clamp(max=self.scale_ub)
            else:
                x_max = x.abs().max().unsqueeze(-1).to(torch.float32)
            scale = (x_max / FMAX).clamp(min=MIN_SCALE)
        out = x.to(torch.float32) * scale.to(torch.float32).reciprocal()
        out = out.clamp(-FMAX, FMAX).to(FP8)
        return (out,) if self.scale is not None else (out, scale)

    def _group(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shape = x.shape
        groups = x.view(-1, shape[-1] // GROUP, GROUP)
        absmax = groups.abs().max(dim=-1, keepdim=True)[0].float()
        scales = absmax / FMAX
        if self.kind == "group_ue8m0":
            scales = torch.exp2(torch.ceil(torch.log2(scales)))
        scales = scales.clamp(min=MIN_SCALE)
        q = (groups / scales).clamp(-FMAX, FMAX).to(FP8).view(shape)
        scales = scales.squeeze(-1).reshape(shape[:-1] + (shape[-1] // GROUP,))
        if self.kind == "group_col":
            scales = scales.transpose(-2, -1).contiguous().transpose(-1, -2)
        return q, scales


class NormForms(nn.Module):
    """RMSNorm without and with residual."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.w1 = nn.Parameter(1 + 0.1 * torch.randn(HIDDEN, dtype=dtype))
        self.w2 = nn.Parameter(1 + 0.1 * torch.randn(HIDDEN, dtype=dtype))

    def forward(self, x: torch.Tensor, r: torch.Tensor, h: torch.Tensor):
        return (rms_norm(x, self.w1), *rms_norm(x, self.w2, r))


class QuantForms(NormForms):
    """One QuantFP8 configuration after a norm, a norm with residual and a SiLU-and-mul."""

    def __init__(self, dtype: torch.dtype, kind: str) -> None:
        super().__init__(dtype)
        self.quant = QuantFP8(kind)

    def forward(self, x: torch.Tensor, r: torch.Tensor, h: torch.Tensor):
        y, residual = rms_norm(x, self.w2, r)
        return (*self.quant(rms_norm(x, self.w1)), *self.quant(y), residual,
                *self.quant(act_and_mul(h, "silu")))


class ActForms(nn.Module):
    """SiluAndMul, GeluAndMul("none"), GeluAndMul("tanh"), each then a static quant."""

    ACTS = ("silu", "gelu", "gelu_tanh")

    def __init__(self) -> None:
        super().__init__()
        self.quant = QuantFP8("static")

    def forward(self, h: torch.Tensor):
        return tuple(self.quant(act_and_mul(h, a))[0] for a in self.ACTS)


FORMS = ("vllm-norm", *(f"vllm-quant-{k}" for k in QUANTS), "vllm-act")


def _inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(SEED)
    return (torch.randn(TOKENS, HIDDEN, generator=g).to(dtype),
            torch.randn(TOKENS, HIDDEN, generator=g).to(dtype),
            torch.randn(TOKENS, 2 * HIDDEN, generator=g).to(dtype))


def build_form(form: str, dtype: torch.dtype) -> Built:
    torch.manual_seed(SEED)
    x, r, h = _inputs(dtype)
    if form == "vllm-norm":
        return Built(NormForms(dtype), (x, r, h), Sites(norm=2, residual=1),
                     ("value",) * 3, (0, 0, 0))
    if form == "vllm-act":
        return Built(ActForms(), (h,), Sites(act=3, quant=3, pairs=3), ("value",) * 3)
    kind = form.removeprefix("vllm-quant-")
    per_quant = ("value",) if kind == "static" else ("value", "scales")
    outputs = (*per_quant, *per_quant, "value", *per_quant)
    pairs = 0 if kind == "per_tensor" else 3
    return Built(QuantForms(dtype, kind), (x, r, h),
                 Sites(norm=2, residual=1, act=1, quant=3, pairs=pairs), outputs, (0, 0, 0))
