"""Launchers: one function per op with exactly the native signature (docs/OPS.md).

Each builds the KernelSpec of its call, allocates outputs as the native does (shapes,
dtypes, column-major scale strides) and launches one program per row. Rows are passed
with their stride, so row-sliced inputs are not copied. Epsilon is a runtime argument by
default (one compiled kernel for every epsilon); `norm(..., bake_epsilon=True)` bakes it.

Annotations are real (no `from __future__ import annotations`): the torch custom ops
infer their schemas from the natives, and these functions must match them.
"""

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator
from functools import lru_cache

import torch
from torch import Tensor

from vllm_xdsl.backends.triton.compile import get_kernels
from vllm_xdsl.backends.triton.spec import KernelSpec, default_block_size, default_num_warps
from vllm_xdsl.core.catalog import SPECS, quant_specs
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.ops.activations import gate_and_up
from vllm_xdsl.ops.dtypes import FP8_DTYPES, to_torch
from vllm_xdsl.ops.fused_signature import cached_scheme_of
from vllm_xdsl.ops.natives_variant import dynamic_scale

_F32 = torch.float32


def _rows(t: Tensor) -> Tensor:
    """A [T, H] view of `t` with unit column stride (copies only if no such view exists)."""
    if t.dim() == 0:
        raise ValueError("expected a tensor with a hidden dimension, got a 0-d tensor")
    if t.stride(-1) != 1:
        t = t.contiguous()
    return t.reshape(-1, t.shape[-1])


def _kernel_view(t: Tensor) -> Tensor:
    """fp8 outputs are written as their bits through a uint8 view (see emit_common)."""
    return t.view(torch.uint8) if t.dtype in FP8_DTYPES else t


# Whether to round to bf16 / e4m3fn with the GPU's conversion instructions instead of f32
# bit arithmetic: "auto" (default) where the device converts as torch does, checked once on
# it (conversion_check); "1" wherever the device has the instructions, unchecked; "0" never.
HW_CASTS_ENV = "VLLM_XDSL_TRITON_HW_CASTS"
_HW_CASTS_MODES = {"": "auto", "auto": "auto", "1": "on", "true": "on", "0": "off", "false": "off"}
_hw_casts_override: bool | None = None
# Whether a device's conversions passed the check (conversion_check installs it: the check
# launches these kernels). Until then "auto" keeps the emulation, which is always exact.
def _unchecked(device: torch.device) -> bool:
    return False


_conversions_checked: Callable[[torch.device], bool] = _unchecked


def set_conversion_check(checked: Callable[[torch.device], bool]) -> None:
    """Install the check that "auto" asks before using a device's conversions."""
    global _conversions_checked
    _conversions_checked = checked


@contextlib.contextmanager
def hw_casts(enabled: bool) -> Iterator[None]:
    """Ask for (or against) hardware conversions within the block, whatever the environment
    says and unchecked (benchmarks compare both in one process). A device that cannot
    still emulates."""
    global _hw_casts_override
    before, _hw_casts_override = _hw_casts_override, enabled
    try:
        yield
    finally:
        _hw_casts_override = before


def uses_hw_casts(device: torch.device) -> bool:
    """Whether kernels launched on `device` now round with its conversion instructions."""
    if _hw_casts_override is not None:
        return _hw_casts_override and converts_exactly(device)
    mode = _hw_casts_mode(os.environ.get(HW_CASTS_ENV, ""))
    if mode == "off" or not converts_exactly(device):
        return False
    return mode == "on" or _conversions_checked(device)


@lru_cache(maxsize=8)
def _hw_casts_mode(value: str) -> str:
    """The mode a value of the variable asks for. A bad value warns once (one line, not a
    traceback from inside a launch) and means auto: checked, so exact either way."""
    mode = _HW_CASTS_MODES.get(value.strip().lower())
    if mode is None:
        warnings.warn(f"{HW_CASTS_ENV}={value!r} is not auto, 1 or 0 (or true, false); "
                      "using auto", RuntimeWarning, stacklevel=4)
        return "auto"
    return mode


@lru_cache(maxsize=16)
def converts_exactly(device: torch.device) -> bool:
    """Whether Triton's f32 -> bf16 / e4m3fn conversions on `device` are the
    round-to-nearest-even instructions: NVIDIA GPUs from sm_89 (the first with
    cvt.rn.satfinite.e4m3x2); not Triton's CPU interpreter (OPS.md), not ROCm (unverified
    here)."""
    if device.type != "cuda" or torch.version.hip is not None:
        return False
    if os.environ.get("TRITON_INTERPRET", "") == "1":
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


def _spec(
    op: str,
    x: Tensor,
    width: int,
    weight_dtype: torch.dtype | None = None,
    epsilon: float | None = None,
    variance_size: int | None = None,
    scheme: QuantScheme | None = None,
    has_scale_ub: bool = False,
    has_up: bool = False,
    zero_point: Tensor | None = None,
    rounded_sum: bool = False,
) -> KernelSpec:
    return _cached_spec(
        op,
        x.dtype,
        default_block_size(op, scheme, width),
        weight_dtype,
        epsilon,
        variance_size,
        scheme,
        has_scale_ub,
        uses_hw_casts(x.device),
        has_up,
        _zero_point_kind(op, zero_point, scheme, x.shape[:-1].numel(), width),
        rounded_sum,
    )


def _zero_point_kind(op: str, zero_point: Tensor | None, scheme: QuantScheme | None, rows: int,
                     width: int) -> str | None:
    """None, "tensor" (one value), "token" (one per row, [..., 1]) or "group" (per-group
    schemes: one per group, [..., G]); ValueError for any other shape."""
    if zero_point is None:
        return None
    if zero_point.numel() == 1:  # [], [1] or [1, 1]: the native broadcasts it over x
        return "tensor"
    group = scheme is not None and scheme.granularity == "group"
    groups = width // scheme.group_size if scheme is not None and group else 1
    if zero_point.numel() == rows and zero_point.shape[-1] == 1:
        return "token"
    if groups > 1 and zero_point.numel() == rows * groups and zero_point.shape[-1] == groups:
        return "group"
    per_group = f", nor one per group ({groups} a row)" if group else ""
    raise ValueError(f"{op}: zero_point of shape {tuple(zero_point.shape)} is neither one "
                     f"value, nor one per row ({rows} rows){per_group}")


def _zero_point_args(kind: str | None, zero_point: Tensor | None) -> list:
    """Kernel arguments of a zero point of `kind` (emit_common.quant_params)."""
    if zero_point is None:
        return []
    if kind == "tensor":
        return [zero_point.reshape(1)]
    if kind == "group":
        groups = zero_point.reshape(-1, zero_point.shape[-1])
        return [groups, groups.stride(0), groups.stride(1)]
    rows = zero_point.reshape(-1, 1)
    return [rows, rows.stride(0)]


@lru_cache(maxsize=4096)
def _cached_spec(
    op: str,
    dtype: torch.dtype,
    block: int,
    weight_dtype: torch.dtype | None,
    epsilon: float | None,
    variance_size: int | None,
    scheme: QuantScheme | None,
    has_scale_ub: bool,
    hw: bool,
    has_up: bool = False,
    zero_point: str | None = None,
    rounded_sum: bool = False,
) -> KernelSpec:
    # Cached: a decode-sized launch must not pay for building and validating a spec.
    return KernelSpec(
        op,
        dtype,
        weight_dtype,
        epsilon,
        variance_size,
        scheme,
        has_scale_ub,
        block,
        default_num_warps(block),
        hw,
        has_up,
        zero_point,
        rounded_sum,
    )


def _launch(spec: KernelSpec, tokens: int, *args, prologue: tuple = ()) -> None:
    """Run the spec's kernels over `tokens` rows (the last argument is the row width; the
    absmax kernel, if any, gets `prologue`). Tiled kernels get one program per column tile."""
    if tokens == 0:
        return
    kernels = get_kernels(spec)
    meta = {"BLOCK": spec.block_size, "num_warps": spec.num_warps}
    for kernel in kernels[:-1]:
        kernel[(tokens,)](*prologue, **meta)
    width = args[-1]
    grid = (tokens, -(-width // spec.block_size)) if spec.tiled else (tokens,)
    kernels[-1][grid](*args, **meta)


def _fused_quant_epilogue(
    spec: KernelSpec, scheme: QuantScheme, tokens: int, width: int, device: torch.device,
    args: list, scale: Tensor | None, scale_ub: Tensor | None, zero_point: Tensor | None,
) -> Tensor:
    """The scales of a fused op's quant epilogue (allocated; a static scheme's scale copied
    in when there is no row to write it), its kernel arguments appended to `args`."""
    scales = _alloc_scales(scheme, tokens, width, device)
    args += _quant_args(scheme, scales, scale, scale_ub, fused=True)
    args += _zero_point_args(spec.zero_point, zero_point)
    if tokens == 0 and scheme.static:
        assert scale is not None  # a static scheme has one (scheme_of checks)
        scales.copy_(scale.to(_F32).reshape(1))
    return scales


def _alloc_scales(scheme: QuantScheme, tokens: int, width: int, device: torch.device) -> Tensor:
    if scheme.static:
        return torch.empty(1, dtype=_F32, device=device)
    sd = to_torch(scheme.variant.scale_dtype)  # f32 unless a variant rounds the scales
    if scheme.granularity == "tensor":
        return torch.empty(1, dtype=sd, device=device)
    if scheme.granularity == "token":
        return torch.empty(tokens, 1, dtype=sd, device=device)
    groups = width // scheme.group_size
    if scheme.column_major_scales:  # shape [T, G], storage [G, T], as the native
        return torch.empty(groups, tokens, dtype=sd, device=device).t()
    return torch.empty(tokens, groups, dtype=sd, device=device)


def _quant_args(
    scheme: QuantScheme,
    scales: Tensor | None,
    scale: Tensor | None,
    scale_ub: Tensor | None,
    fused: bool,
    amax: Tensor | None = None,
) -> list:
    """Kernel arguments of the quant epilogue (order of emit_common.quant_params)."""
    if scheme.static:
        return [scale, scales] if fused else [scale]
    if scheme.granularity == "tensor":
        return [amax, scales]
    if scheme.granularity == "token":
        return [scales] if scale_ub is None else [scales, scale_ub]
    assert scales is not None
    return [scales, scales.stride(0), scales.stride(1)]


# The norm op of a call: (with a residual, with a quant scheme) -> its catalog name.
_NORM_OP = {(s.family == "residual_norm", s.fused): s.name
            for s in SPECS.values() if s.family in ("norm", "residual_norm")}


def _check_norm_args(x: Tensor, weight: Tensor | None, residual: Tensor | None = None) -> None:
    h = x.shape[-1] if x.dim() else 0
    if weight is not None and tuple(weight.shape) != (h,):
        raise ValueError(f"weight of shape {tuple(weight.shape)} does not match hidden size {h}")
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"residual shape {tuple(residual.shape)} differs from x {tuple(x.shape)}")


def norm(
    x: Tensor,
    residual: Tensor | None,
    weight: Tensor | None,
    epsilon: float,
    variance_size: int | None = None,
    scheme: QuantScheme | None = None,
    scale: Tensor | None = None,
    scale_ub: Tensor | None = None,
    *,
    bake_epsilon: bool = False,
    zero_point: Tensor | None = None,
    rounded_sum: bool = False,
) -> tuple[Tensor, ...]:
    """The norm family: (out | q, [residual_out], [scales]) in the order of the op's results.
    `rounded_sum`: the fused add variant whose norm reads the rounded sum (residual_out)."""
    if rounded_sum and residual is None:
        raise ValueError("rounded_sum needs a residual (it is a fused_add_rms_norm variant)")
    _check_norm_args(x, weight, residual)
    x2 = _rows(x)
    tokens, hidden = x2.shape
    op = _NORM_OP[(residual is not None, scheme is not None)]
    if variance_size is not None and not 0 < variance_size <= hidden:
        raise ValueError(f"{op}: variance_size {variance_size} not in [1, {hidden}]")
    spec = _spec(
        op,
        x,
        hidden,
        weight_dtype=None if weight is None else weight.dtype,
        epsilon=float(epsilon) if bake_epsilon else None,
        variance_size=variance_size,
        scheme=scheme,
        has_scale_ub=scale_ub is not None,
        zero_point=zero_point,
        rounded_sum=rounded_sum,
    )
    out_dtype = x.dtype if scheme is None else scheme.dtype
    out = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    args: list = [x2, x2.stride(0)]
    res_out = None
    if residual is not None:
        r2 = _rows(residual)
        args += [r2, r2.stride(0)]
    if weight is not None:
        args.append(weight.contiguous())
    args += [_kernel_view(out), hidden]
    if residual is not None:
        res_out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        args += [res_out, hidden]
    scales = None
    if scheme is not None:
        scales = _fused_quant_epilogue(spec, scheme, tokens, hidden, x.device, args, scale,
                                       scale_ub, zero_point)
    if spec.epsilon is None:
        args.append(float(epsilon))
    _launch(spec, tokens, *args, hidden)
    return tuple(t for t in (out, res_out, scales) if t is not None)


def quant(
    x: Tensor,
    scheme: QuantScheme,
    scale: Tensor | None = None,
    scale_ub: Tensor | None = None,
    op: str | None = None,
    zero_point: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """The unfused quant of `scheme` (as ops.quant_native): (q, scales or None if static)."""
    if op is None:
        op = _QUANT_OP[(scheme.is_fp8, scheme.static, scheme.granularity)]
    x2 = _rows(x)
    tokens, hidden = x2.shape
    if scheme.granularity == "group" and hidden % scheme.group_size:
        raise ValueError(
            f"{op}: group_size {scheme.group_size} does not divide hidden size {hidden}"
        )
    spec = _spec(op, x, hidden, scheme=scheme, has_scale_ub=scale_ub is not None,
                 zero_point=zero_point)
    q = torch.empty(x.shape, dtype=scheme.dtype, device=x.device)
    scales = None if scheme.static else _alloc_scales(scheme, tokens, hidden, x.device)
    amax = None
    prologue: tuple = ()
    if not scheme.static and scheme.granularity == "tensor":
        amax = torch.zeros(1, dtype=torch.int32, device=x.device)  # f32 bits (absmax kernel)
        prologue = (x2, x2.stride(0), amax, hidden)
        if tokens == 0:  # an empty tensor's scale: that of an absmax of 0 (the floor)
            assert scales is not None  # allocated for every dynamic scheme
            scales.copy_(dynamic_scale(torch.zeros(1, device=x.device), scheme, None))
    args = [
        x2,
        x2.stride(0),
        _kernel_view(q),
        hidden,
        *_quant_args(scheme, scales, scale, scale_ub, False, amax),
        *_zero_point_args(spec.zero_point, zero_point),
    ]
    _launch(spec, tokens, *args, hidden, prologue=prologue)
    return q, scales


_QUANT_OP = {(s.form.dtype == "fp8", s.form.static, s.form.granularity): s.name
             for s in quant_specs() if s.form is not None}


def act(
    op: str,
    x: Tensor,
    up: Tensor | None = None,
    scheme: QuantScheme | None = None,
    scale: Tensor | None = None,
    scale_ub: Tensor | None = None,
    zero_point: Tensor | None = None,
    scalars: tuple[float, ...] = (),
) -> tuple[Tensor, ...]:
    """The act-and-mul family (`op` names the unfused op): (out,) or (q, scales). `scalars`:
    the op's own scalar parameters, in the native's order (the kernel's, before D)."""
    gate, up_ = gate_and_up(op, x, up)  # the native's checks and messages
    x2 = _rows(x)
    tokens, d = x2.shape[0], gate.shape[-1]
    if scheme is not None and scheme.granularity == "group" and d % scheme.group_size:
        raise ValueError(f"{op}_quant: group_size {scheme.group_size} does not divide {d}")
    name = op if scheme is None else f"{op}_quant"
    spec = _spec(name, x, d, scheme=scheme, has_scale_ub=scale_ub is not None,
                 has_up=up is not None, zero_point=zero_point)
    out_dtype = x.dtype if scheme is None else scheme.dtype
    out = torch.empty(gate.shape, dtype=out_dtype, device=x.device)
    args: list = [x2, x2.stride(0)]
    if up is not None:
        u2 = _rows(up_)
        args += [u2, u2.stride(0)]
    args += [_kernel_view(out), d]
    if scheme is None:
        _launch(spec, tokens, *args, *scalars, d)
        return (out,)
    scales = _fused_quant_epilogue(spec, scheme, tokens, d, x.device, args, scale, scale_ub,
                                   zero_point)
    _launch(spec, tokens, *args, *scalars, d)
    return out, scales


def sparse_act(
    op: str, x: Tensor, std_multiplier: float, approximate: str, up: Tensor | None = None
) -> Tensor:
    """gelu_and_mul_sparse: one program per row (the row's mean and std first)."""
    if approximate not in ("none", "tanh"):  # the native's check and message
        raise ValueError(f"{op}: approximate must be 'none' or 'tanh', not {approximate!r}")
    gate, up_ = gate_and_up(op, x, up)
    x2 = _rows(x)
    tokens, d = x2.shape[0], gate.shape[-1]
    spec = _sparse_spec(op, x.dtype, default_block_size(op, None, d), uses_hw_casts(x.device),
                        up is not None, approximate)
    out = torch.empty(gate.shape, dtype=x.dtype, device=x.device)
    args: list = [x2, x2.stride(0)]
    if up is not None:
        u2 = _rows(up_)
        args += [u2, u2.stride(0)]
    args += [out, d, float(std_multiplier), d]
    _launch(spec, tokens, *args)
    return out


@lru_cache(maxsize=256)
def _sparse_spec(op: str, dtype: torch.dtype, block: int, hw: bool, has_up: bool,
                 approximate: str) -> KernelSpec:
    return KernelSpec(op, dtype, block_size=block, num_warps=default_num_warps(block),
                      hw_casts=hw, has_up=has_up, approximate=approximate)


# The validated scheme of a fused op's arguments, cached: (op, scale, scale_ub, *the
# scheme's fields in scheme_of's order); the native's checks and messages.
fused_scheme = cached_scheme_of
