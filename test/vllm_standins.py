"""Stand-ins for vLLM's ops that this machine lacks (the CUDA-only `_C` kernels, vLLM IR's
ops and the ROCm AITER norms without vLLM), registered with vLLM 0.33's exact schemas
(vllm_xdsl/transforms/vllm_schemas.py) so that tests build graphs in vLLM's own forms.

Each stand-in computes what vLLM's CUDA kernel (or vLLM IR's native) computes, rounding
where the kernel rounds (`T` = the activation dtype); the raise tests compare the raised
graph against them. `register()` registers those that are missing and returns their names.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from vllm_xdsl.transforms.raising.vllm_schemas import SCHEMAS

F32 = torch.float32
_LIBS: dict[str, torch.library.Library] = {}


def _fmax(t: torch.Tensor) -> float:
    return float(torch.finfo(t.dtype).max) if t.dtype != torch.float8_e4m3fnuz else 224.0


def _inv_rms(xf: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)


def _kernel_norm(xf: torch.Tensor, dt: torch.dtype, weight: torch.Tensor | None,
                 eps: float) -> torch.Tensor:
    """`(T)(x * rms) * w` in T, from the f32 x the kernel normalises."""
    y = (xf * _inv_rms(xf, eps)).to(dt)
    return y if weight is None else y * weight


def _fp8(y: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    m = _fmax(like)
    return y.clamp(-m, m).to(like.dtype)


def _token_scale(y: torch.Tensor, like: torch.Tensor, ub: torch.Tensor | None) -> torch.Tensor:
    a = y.abs().amax(-1, keepdim=True)
    if ub is not None:
        a = torch.minimum(a, ub.float())
    m = _fmax(like)
    return torch.clamp(a / m, min=1.0 / (m * 512.0))


def _block_scale(y: torch.Tensor, like: torch.Tensor, gs: int) -> torch.Tensor:
    return _token_scale(y.unflatten(-1, (-1, gs)), like, None).squeeze(-1)


def _per_block(y: torch.Tensor, out: torch.Tensor, scales: torch.Tensor, gs: int) -> None:
    s = _block_scale(y, out, gs)
    scales.copy_(s)
    out.copy_(_fp8((y.unflatten(-1, (-1, gs)) / s.unsqueeze(-1)).flatten(-2), out))


# --- _C kernels ------------------------------------------------------------------------


def rms_norm(result, input, weight, epsilon):  # noqa: ANN001, ANN201
    result.copy_(_kernel_norm(input.float(), input.dtype, weight, epsilon))


def fused_add_rms_norm(input, residual, weight, epsilon):  # noqa: ANN001, ANN201
    z = input + residual  # the kernel adds in T
    residual.copy_(z)
    input.copy_(_kernel_norm(z.float(), z.dtype, weight, epsilon))


def static_scaled_fp8_quant(result, input, scale, group_shape=None):  # noqa: ANN001, ANN201
    assert group_shape is None, "stand-in: per-tensor scales only"
    result.copy_(_fp8(input.float() * (1.0 / scale.float()), result))


def dynamic_per_token_scaled_fp8_quant(result, input, scale, scale_ub):  # noqa: ANN001, ANN201
    s = _token_scale(input.float(), result, scale_ub)
    scale.copy_(s)
    result.copy_(_fp8(input.float() / s, result))


def static_scaled_int8_quant(result, input, scale, azp):  # noqa: ANN001, ANN201
    q = torch.round(input.float() / scale.float())
    if azp is not None:  # the kernel rounds, then adds the zero point
        q = q + azp
    result.copy_(q.clamp(-128, 127).to(torch.int8))


def dynamic_scaled_int8_quant(result, input, scale, azp):  # noqa: ANN001, ANN201
    assert azp is None, "stand-in: symmetric only"
    a = input.float().abs().amax(-1, keepdim=True)
    scale.copy_(a / 127.0)
    result.copy_(torch.round(input.float() * (127.0 / a)).clamp(-128, 127).to(torch.int8))


def per_token_group_fp8_quant(input, output_q, output_s, group_size, eps, fp8_min,  # noqa: ANN001, ANN201
                              fp8_max, scale_ue8m0, dummy_is_scale_transposed,
                              dummy_is_tma_aligned):
    g = input.float().unflatten(-1, (-1, group_size))
    s = torch.clamp(g.abs().amax(-1, keepdim=True), min=eps) / fp8_max
    output_s.copy_(s.squeeze(-1))
    output_q.copy_((g / s).clamp(fp8_min, fp8_max).flatten(-2).to(output_q.dtype))


def rms_norm_static_fp8_quant(result, input, weight, scale, epsilon):  # noqa: ANN001, ANN201
    y = _kernel_norm(input.float(), input.dtype, weight, epsilon)
    result.copy_(_fp8(y.float() * (1.0 / scale.float()), result))


def fused_add_rms_norm_static_fp8_quant(result, input, residual, weight, scale, epsilon):  # noqa: ANN001, ANN201
    z = input + residual
    residual.copy_(z)
    y = _kernel_norm(z.float(), z.dtype, weight, epsilon)
    result.copy_(_fp8(y.float() * (1.0 / scale.float()), result))


def _dynamic_norm_input(input, residual):  # noqa: ANN001, ANN202
    xf = input.float()
    if residual is not None:  # these kernels add in f32
        xf = xf + residual.float()
        residual.copy_(xf.to(residual.dtype))
    return xf


def rms_norm_dynamic_per_token_quant(result, input, weight, scale, epsilon, scale_ub,  # noqa: ANN001, ANN201
                                     residual):
    y = _kernel_norm(_dynamic_norm_input(input, residual), input.dtype, weight, epsilon).float()
    s = _token_scale(y, result, scale_ub)
    scale.copy_(s)
    result.copy_(_fp8(y / s, result))


def rms_norm_per_block_quant(result, input, weight, scale, epsilon, scale_ub, residual,  # noqa: ANN001, ANN201
                             group_size, is_scale_transposed):
    assert scale_ub is None and not is_scale_transposed, "stand-in: row-major, no scale_ub"
    y = _kernel_norm(_dynamic_norm_input(input, residual), input.dtype, weight, epsilon).float()
    _per_block(y, result, scale, group_size)


def _act(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[..., None]:
    def kernel(out, input):  # noqa: ANN001, ANN202
        d = input.shape[-1] // 2
        out.copy_(fn(input[..., :d]) * input[..., d:])  # activation rounded to T, product in T
    return kernel


def fatrelu_and_mul(out, input, threshold):  # noqa: ANN001, ANN201
    # csrc/activation_kernels.cu: `(T)(f > threshold ? f : 0.0f)`, then the product in T
    d = input.shape[-1] // 2
    gate = input[..., :d]
    kept = torch.where(gate.float() > threshold, gate, torch.zeros_like(gate))
    out.copy_(kept * input[..., d:])


def _silu_f32(input: torch.Tensor) -> torch.Tensor:
    d = input.shape[-1] // 2
    g, u = input[..., :d].float(), input[..., d:].float()
    return g / (1.0 + torch.exp(-g)) * u  # the quant kernels keep the product in f32


def silu_and_mul_quant(result, input, scale):  # noqa: ANN001, ANN201
    result.copy_(_fp8(_silu_f32(input) * (1.0 / scale.float()), result))


def silu_and_mul_per_block_quant(out, input, scales, group_size, scale_ub=None,  # noqa: ANN001, ANN201
                                 is_scale_transposed=False):
    assert scale_ub is None and not is_scale_transposed, "stand-in: row-major, no scale_ub"
    _per_block(_silu_f32(input), out, scales, group_size)


# --- vLLM IR (its natives) and AITER -----------------------------------------------------


def ir_rms_norm(x, weight, epsilon, variance_size=None):  # noqa: ANN001, ANN201
    xf = x.float()
    var = (xf if variance_size is None else xf[..., :variance_size]).pow(2).mean(-1, keepdim=True)
    y = xf * torch.rsqrt(var + epsilon)
    if weight is not None:
        y = y.to(weight.dtype) * weight
    return y.to(x.dtype)


def ir_fused_add_rms_norm(x, x_residual, weight, epsilon, variance_size=None):  # noqa: ANN001, ANN201
    s = x.float() + x_residual.float()
    var = (s if variance_size is None else s[..., :variance_size]).pow(2).mean(-1, keepdim=True)
    y = s * torch.rsqrt(var + epsilon)
    if weight is not None:
        y = y.to(weight.dtype) * weight
    return y.to(x.dtype), s.to(x.dtype)


def ir_gelu_and_mul_sparse(x, std_multiplier, approximate="none"):  # noqa: ANN001, ANN201
    d = x.shape[-1] // 2
    gate = x[..., :d]
    mean = torch.mean(gate, dim=-1, keepdim=True)
    std = torch.std(gate, dim=-1, keepdim=True, unbiased=False)
    sparse_gate = F.relu(gate - (mean + std * std_multiplier))
    return F.gelu(sparse_gate, approximate=approximate) * x[..., d:]


def aiter_fused_add_rms_norm(x, residual, weight, variance_epsilon, gemma_norm=False):  # noqa: ANN001, ANN201
    w = weight.float() + 1.0 if gemma_norm else weight
    return ir_fused_add_rms_norm(x, residual, w, variance_epsilon)


IMPLS: dict[str, Callable[..., object]] = {
    "_C::rms_norm": rms_norm,
    "_C::fused_add_rms_norm": fused_add_rms_norm,
    "_C::static_scaled_fp8_quant": static_scaled_fp8_quant,
    "_C::dynamic_per_token_scaled_fp8_quant": dynamic_per_token_scaled_fp8_quant,
    "_C::static_scaled_int8_quant": static_scaled_int8_quant,
    "_C::dynamic_scaled_int8_quant": dynamic_scaled_int8_quant,
    "_C::per_token_group_fp8_quant": per_token_group_fp8_quant,
    "_C::rms_norm_static_fp8_quant": rms_norm_static_fp8_quant,
    "_C::fused_add_rms_norm_static_fp8_quant": fused_add_rms_norm_static_fp8_quant,
    "_C::rms_norm_dynamic_per_token_quant": rms_norm_dynamic_per_token_quant,
    "_C::rms_norm_per_block_quant": rms_norm_per_block_quant,
    "_C::silu_and_mul": _act(F.silu),
    "_C::gelu_and_mul": _act(F.gelu),
    "_C::gelu_tanh_and_mul": _act(lambda g: F.gelu(g, approximate="tanh")),
    "_C::fatrelu_and_mul": fatrelu_and_mul,
    "_C::silu_and_mul_quant": silu_and_mul_quant,
    "_C::silu_and_mul_per_block_quant": silu_and_mul_per_block_quant,
    "vllm_ir::rms_norm": ir_rms_norm,
    "vllm_ir::fused_add_rms_norm": ir_fused_add_rms_norm,
    "vllm_ir::fused_add_rms_norm.maybe_inplace": ir_fused_add_rms_norm,
    "vllm_ir::gelu_and_mul_sparse": ir_gelu_and_mul_sparse,
    "vllm_aiter::rms_norm": lambda x, weight, variance_epsilon: ir_rms_norm(x, weight, variance_epsilon),
    "vllm_aiter::fused_add_rms_norm": aiter_fused_add_rms_norm,
}


def _exists(name: str) -> bool:
    namespace, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), op)
        getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        return False
    return True


def register() -> list[str]:
    """Register the stand-ins this process lacks (idempotent); their names."""
    added = []
    for name, impl in IMPLS.items():
        if _exists(name):
            continue
        namespace, _, rest = name.partition("::")
        lib = _LIBS.setdefault(namespace, torch.library.Library(namespace, "FRAGMENT"))
        lib.define(SCHEMAS[name])
        lib.impl(rest, impl, "CompositeExplicitAutograd")
        added.append(name)
    return added
