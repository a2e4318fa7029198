"""The kernel templates: norm (+add, +quant), quant, act-and-mul (+quant), sparse act-and-mul.

Each template writes the source of one kernel for a KernelSpec, keeping only the code the
spec needs. Every kernel runs one program per row (a dynamic token count is the grid),
covers the row with one BLOCK of columns (masked beyond the hidden size), loads each input
once, upcasts to f32 at once, and takes row strides as arguments (non-contiguous rows).
"""

from __future__ import annotations

import math

import torch

from vllm_xdsl.backends.triton.emit_common import (
    TL_DTYPE,
    KernelText,
    absmax,
    flt,
    quant_epilogue,
    quant_params,
    round_to,
)
from vllm_xdsl.backends.triton.spec import KernelSpec
from vllm_xdsl.core.catalog import SPECS
from vllm_xdsl.ops.activations import activation_of

_PROLOGUE = (
    "row = tl.program_id(0).to(tl.int64)",
    "cols = tl.arange(0, BLOCK)",
)


def _prologue(spec: KernelSpec) -> tuple[str, ...]:
    """Program setup. Tiled kernels add the column tile's offset (grid axis 1). Per-group
    quant tiles the row as [groups, group_size] instead, so group reductions are plain
    axis-1 reductions (no reshape, no layout shuffle)."""
    s = spec.scheme
    base = "tile * BLOCK + " if spec.tiled else ""
    lines = [_PROLOGUE[0]]
    if spec.tiled:
        lines.append("tile = tl.program_id(1)  # this program's BLOCK columns of the row")
    if s is None or s.granularity != "group":
        return (*lines, f"cols = {base}tl.arange(0, BLOCK)")
    g = s.group_size
    return (
        *lines,
        f"# the columns as a [BLOCK // {g}, {g}] tile: one tile row per quant group",
        f"cols = {base}tl.arange(0, BLOCK // {g})[:, None] * {g} + tl.arange(0, {g})[None, :]",
    )


def _row_axis(spec: KernelSpec) -> str:
    """The reduction axis that covers a whole row (None: all axes of a 2-D tile)."""
    s = spec.scheme
    return "None" if s is not None and s.granularity == "group" else "0"


def _load(ptr: str, stride: str, extra: str = "") -> str:
    return f"tl.load({ptr} + row * {stride} + {extra}cols, mask=mask, other=0.0).to(tl.float32)"


def _store(ptr: str, stride: str, value: str, dtype: torch.dtype) -> str:
    return f"tl.store({ptr} + row * {stride} + cols, {value}.to({TL_DTYPE[dtype]}), mask=mask)"


def _store_or_quantize(k: KernelText, spec: KernelSpec, n: str) -> None:
    """Write the row's result `y` (`n` columns): as it is, or through the fused quant
    epilogue when the kernel is a fused quant op."""
    if spec.scheme is None:
        k.add(_store("out_ptr", "out_row_stride", "y", spec.dtype))
    else:
        quant_epilogue(
            k, spec.scheme, spec.has_scale_ub, fused=True, n=n, tiled=spec.tiled,
            hw=spec.hw_casts, zero_point=spec.zero_point,
        )


def norm_kernel(spec: KernelSpec) -> list[KernelText]:
    """rms_norm / fused_add_rms_norm, optionally followed by a quant epilogue."""
    k = KernelText(f"{spec.op}_kernel", ["x_ptr", "x_row_stride"])
    if spec.has_residual:
        k.params += ["residual_ptr", "residual_row_stride"]
    if spec.has_weight:
        k.params.append("weight_ptr")
    if spec.scheme is None:
        k.params += ["out_ptr", "out_row_stride"]
    else:
        k.params += ["q_ptr", "q_row_stride"]
    if spec.has_residual:
        k.params += ["residual_out_ptr", "residual_out_row_stride"]
    if spec.scheme is not None:
        k.params += quant_params(spec.scheme, spec.has_scale_ub, fused=True,
                                 zero_point=spec.zero_point)
    if spec.epsilon is None:
        k.params.append("epsilon")
    k.params += ["H", "BLOCK: tl.constexpr"]
    eps = "epsilon" if spec.epsilon is None else flt(spec.epsilon)

    k.add(*_prologue(spec), "mask = cols < H", "x = " + _load("x_ptr", "x_row_stride"))
    if spec.has_residual and spec.rounded_sum:
        k.add(
            f"# s = x + residual in f32, rounded to {spec.dtype}: residual_out, and what the norm reads",
            "x = " + round_to("x + " + _load("residual_ptr", "residual_row_stride"), spec.dtype,
                              spec.hw_casts),
            _store("residual_out_ptr", "residual_out_row_stride", "x", spec.dtype),
        )
    elif spec.has_residual:
        k.add(
            "# s = x + residual in f32; residual_out is s rounded, the norm uses s unrounded",
            "x = x + " + _load("residual_ptr", "residual_row_stride"),
            _store(
                "residual_out_ptr", "residual_out_row_stride", round_to("x", spec.dtype, spec.hw_casts), spec.dtype
            ),
        )
    if spec.variance_size is None:
        k.add(f"var = tl.div_rn(tl.sum(x * x, axis={_row_axis(spec)}), H * 1.0)")
    else:
        vs = spec.variance_size
        k.add(
            f"# the variance covers the first {vs} columns only",
            f"var = tl.div_rn(tl.sum(tl.where(cols < {vs}, x * x, 0.0), axis=0), {flt(vs)})",
        )
    k.add(f"y = x * tl.div_rn(1.0, tl.sqrt_rn(var + {eps}))")
    final: torch.dtype | None = spec.dtype
    if spec.weight_dtype is not None:
        wd = spec.weight_dtype
        then = "" if wd == spec.dtype else f", then to {spec.dtype}"
        k.add(
            f"# y.to(weight.dtype) * weight, rounded to {wd}{then}",
            "w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)",
            "y = " + round_to(round_to("y", wd, spec.hw_casts) + " * w", wd, spec.hw_casts),
        )
        final = None if wd == spec.dtype else spec.dtype
    if final is not None:
        k.add("y = " + round_to("y", final, spec.hw_casts))
    _store_or_quantize(k, spec, n="H")
    return [k]


def quant_kernel(spec: KernelSpec) -> list[KernelText]:
    """The unfused quant ops; per-tensor dynamic gets an absmax kernel (atomic max) first."""
    assert spec.scheme is not None
    kernels = []
    if not spec.scheme.static and spec.scheme.granularity == "tensor":
        a = KernelText(
            f"{spec.op}_absmax_kernel",
            ["x_ptr", "x_row_stride", "amax_ptr", "N", "BLOCK: tl.constexpr"],
        )
        a.add(
            *_PROLOGUE,
            "mask = cols < N",
            "x = " + _load("x_ptr", "x_row_stride"),
            "# amax_ptr: the f32 bits as int32, from 0. For floats >= 0 (and NaN, above inf)",
            "# the bits order as the values: an integer atomic max is exact and keeps NaN",
            "# (Triton's float atomic_max drops NaN).",
            f"tl.atomic_max(amax_ptr, {absmax('x', 0)}.to(tl.int32, bitcast=True))",
        )
        kernels.append(a)
    k = KernelText(f"{spec.op}_kernel", ["x_ptr", "x_row_stride", "q_ptr", "q_row_stride"])
    k.params += quant_params(spec.scheme, spec.has_scale_ub, fused=False,
                             zero_point=spec.zero_point)
    k.params += ["N", "BLOCK: tl.constexpr"]
    k.add(*_prologue(spec), "mask = cols < N", "y = " + _load("x_ptr", "x_row_stride"))
    quant_epilogue(
            k, spec.scheme, spec.has_scale_ub, fused=False, n="N", tiled=spec.tiled,
            hw=spec.hw_casts, zero_point=spec.zero_point,
        )
    kernels.append(k)
    return kernels


# The activations in f32 (torch's formulas; ops/activations.py). On a GPU tl.exp and erf
# are approximations (ex2.approx, libdevice), so an activation cannot be bitwise anyway: a
# fast division (<= 2 ulps) in place of an IEEE one changes it by as little; the
# interpreter divides exactly either way. tanh GELU uses 0.5 * (1 + tanh(u)) =
# 1 / (1 + exp(-2u)): no tanh in tl, and no cancellation for large negative u.
ACTIVATION_EXPRS = {
    "silu": ("silu(a) = a / (1 + exp(-a))", "a / (1.0 + tl.exp(-a))"),
    "gelu": (
        "gelu(a) = a * 0.5 * (1 + erf(a / sqrt(2)))",
        f"a * 0.5 * (1.0 + tl.math.erf(a * {flt(0.5**0.5)}))",
    ),
    "gelu_tanh": (
        "gelu_tanh(a) = 0.5 * a * (1 + tanh(u)) = a / (1 + exp(-2u)), "
        "u = sqrt(2 / pi) * (a + 0.044715 * a^3)",
        f"a / (1.0 + tl.exp(-2.0 * ({flt((2.0 / math.pi) ** 0.5)} * (a + 0.044715 * a * a * a))))",
    ),
    # exact: a is a value of the dtype, compared with the f32 threshold as torch does
    "fatrelu": ("fatrelu(a) = 0 if a <= threshold else a (NaN kept)",
                "tl.where(a <= threshold, 0.0, a)"),
}


def act_kernel(spec: KernelSpec) -> list[KernelText]:
    """act(gate) * up with the roundings of the dtype, optionally quantized: gate and up are
    the halves x[:, :D], x[:, D:], or x and a separate up (`has_up`). The op's own scalar
    parameters (catalog) are arguments before D, named as in the native: the activation's
    expression reads them."""
    activation = activation_of(spec.op)
    assert activation is not None
    k = KernelText(f"{spec.op}_kernel", ["x_ptr", "x_row_stride"])
    if spec.has_up:
        k.params += ["up_ptr", "up_row_stride"]
    k.params += ["out_ptr", "out_row_stride"] if spec.scheme is None else ["q_ptr", "q_row_stride"]
    if spec.scheme is not None:
        k.params += quant_params(spec.scheme, spec.has_scale_ub, fused=True,
                                 zero_point=spec.zero_point)
    k.params += [*(p.name for p in SPECS[spec.op].own_scalars), "D", "BLOCK: tl.constexpr"]
    up = _load("up_ptr", "up_row_stride") if spec.has_up else _load("x_ptr", "x_row_stride", "D + ")
    what, expr = ACTIVATION_EXPRS[activation]
    k.add(
        *_prologue(spec),
        "mask = cols < D",
        "a = " + _load("x_ptr", "x_row_stride"),
        "b = " + up,
        f"# {what}; it and the product are each rounded to {spec.dtype}, as torch computes them.",
        "y = " + round_to(expr, spec.dtype, spec.hw_casts),
        "y = " + round_to("y * b", spec.dtype, spec.hw_casts),
    )
    _store_or_quantize(k, spec, n="D")
    return [k]


def sparse_act_kernel(spec: KernelSpec) -> list[KernelText]:
    """gelu_and_mul_sparse: the gate sparsified by its row's mean and population std, then
    gelu(gate) * up, rounding where torch does (OPS.md): mean and std reduce in f32 and
    round once; std * std_multiplier, the cutoff, the difference, the GELU and the product
    each round to the dtype. A cutoff kept in f32 would move gate values across it."""
    assert spec.approximate is not None
    k = KernelText(f"{spec.op}_kernel", ["x_ptr", "x_row_stride"])
    if spec.has_up:
        k.params += ["up_ptr", "up_row_stride"]
    k.params += ["out_ptr", "out_row_stride", "std_multiplier", "D", "BLOCK: tl.constexpr"]
    up = _load("up_ptr", "up_row_stride") if spec.has_up else _load("x_ptr", "x_row_stride", "D + ")
    what, expr = ACTIVATION_EXPRS["gelu" if spec.approximate == "none" else "gelu_tanh"]
    dt, hw = spec.dtype, spec.hw_casts
    k.add(
        *_PROLOGUE,
        "mask = cols < D",
        "a = " + _load("x_ptr", "x_row_stride"),
        "b = " + up,
        "mean = tl.div_rn(tl.sum(a, axis=0), D * 1.0)",
        "dev = tl.where(mask, a - mean, 0.0)",
        "std = tl.sqrt_rn(tl.div_rn(tl.sum(dev * dev, axis=0), D * 1.0))",
        f"# cutoff = mean + std * std_multiplier, each step rounded to {dt}",
        "cutoff = " + round_to(round_to("mean", dt, hw) + " + "
                               + round_to(round_to("std", dt, hw) + " * std_multiplier", dt, hw),
                               dt, hw),
        f"a = {round_to('a - cutoff', dt, hw)}",
        "a = tl.where(a < 0.0, 0.0, a)  # relu, NaN kept",
        f"# {what}; it and the product are each rounded to {dt}, as torch computes them.",
        "y = " + round_to(expr, dt, hw),
        "y = " + round_to("y * b", dt, hw),
        _store("out_ptr", "out_row_stride", "y", dt),
    )
    return [k]


TEMPLATES = {"norm": norm_kernel, "quant": quant_kernel, "act": act_kernel,
             "sparse_act": sparse_act_kernel}
