"""A quant variant (and zero point) as the kernels take it: csrc/variant.cuh's `Variant`.

The variant is parsed once here, on the host, into plain ints and floats; the launchers pass
a pointer to it (None: the default numerics, so the default kernels are unchanged). Every
field of docs/OPS.md "Variants" and the zero point is implemented, for every quant scheme.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import torch
from torch import Tensor

from vllm_xdsl.core.catalog import quant_specs
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.core.variant import ROUNDING_DTYPES, variant_problem_beyond
from vllm_xdsl.ops.dtypes import to_torch

ALL_FIELDS = ("scaling", "quotient_dtype", "scale_dtype", "floor", "scale_range", "zero_point")
# RoundCode, ZeroPointCode and Floor of variant.cuh.
_ROUND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_ZERO_POINT = {**_ROUND, torch.int8: 3, torch.uint8: 4}
F_NONE, F_MIN_SCALE, F_ZERO_EPS, F_GROUP_EPS = range(4)
# The unfused quant ops' granularity, their catalog form (the fused ops say it in an argument).
_GRANULARITY = {s.name: s.form.granularity for s in quant_specs() if s.form is not None}
assert set(_ROUND) == {to_torch(d) for d in ROUNDING_DTYPES.values()}


class VxVariant(ctypes.Structure):
    _fields_ = [
        ("recip", ctypes.c_int), ("quotient", ctypes.c_int), ("scale", ctypes.c_int),
        ("floor", ctypes.c_int), ("floor_value", ctypes.c_float), ("range", ctypes.c_float),
        ("zero_rows", ctypes.c_int), ("zp_dtype", ctypes.c_int), ("zp", ctypes.c_void_p),
        ("zp_stride", ctypes.c_int64), ("zp_group_stride", ctypes.c_int64),
    ]


@functools.lru_cache(maxsize=256)
def _scheme_fields(scheme: QuantScheme) -> dict[str, int | float]:
    """The struct fields a scheme's variant fixes (parsed once per scheme, not per launch)."""
    v = scheme.variant
    floor, floor_value = F_NONE, 0.0
    if scheme.granularity == "group" and not v.floor:
        floor, floor_value = F_GROUP_EPS, scheme.group_eps
    elif v.floor == "min_scale" or (not v.floor and scheme.is_fp8):
        floor, floor_value = F_MIN_SCALE, 1.0 / (scheme.qmax * 512.0)
    elif v.floor == "zero_eps":  # eps as the scale dtype holds it (natives_variant)
        floor, floor_value = F_ZERO_EPS, torch.tensor(v.floor_eps, dtype=to_torch(v.scale_dtype)).item()
    return {
        "recip": int(scheme.scaling == "recip"), "quotient": _ROUND[to_torch(v.quotient_dtype)],
        "scale": _ROUND[to_torch(v.scale_dtype)], "floor": floor, "floor_value": floor_value,
        "range": v.scale_range or scheme.qmax,
        "zero_rows": int(scheme.dtype == torch.int8 and not scheme.static and not v.floor),
    }


class KernelVariant:
    """The struct of one launch and the tensors its pointers reach (kept alive with it)."""

    def __init__(self, scheme: QuantScheme, zero_point: Tensor | None, rows: int, groups: int,
                 op: str) -> None:
        zp = None if zero_point is None else _zero_point_rows(zero_point, scheme, rows, groups, op)
        self.zero_point = zp
        per_group = zp is not None and zp.numel() == rows * groups and groups > 1
        self.struct = VxVariant(
            **_scheme_fields(scheme),
            zp_dtype=0 if zp is None else _ZERO_POINT[zp.dtype],
            zp=None if zp is None else zp.data_ptr(),
            zp_stride=0 if zp is None or zp.numel() == 1 else groups if per_group else 1,
            zp_group_stride=int(per_group),
        )

    def address(self) -> int:
        return ctypes.addressof(self.struct)


def kernel_variant(scheme: QuantScheme, zero_point: Tensor | None, rows: int, hidden: int,
                   op: str) -> KernelVariant | None:
    """None for the default numerics without a zero point (the kernels of before variants)."""
    if scheme.variant.is_default and zero_point is None:
        return None
    groups = hidden // scheme.group_size if scheme.granularity == "group" else 1
    return KernelVariant(scheme, zero_point, rows, groups, op)


def _zero_point_rows(zp: Tensor, scheme: QuantScheme, rows: int, groups: int, op: str) -> Tensor:
    """One value, one per row or (per-group schemes) one per group, contiguous, in a dtype
    the kernels read; ValueError else. (The IR takes one per row on per-token schemes only;
    the natives broadcast it on the others as well, and so do the kernels.)"""
    per_row = zp.numel() == rows and zp.shape[-1:] == (1,)
    per_group = scheme.granularity == "group" and zp.numel() == rows * groups and zp.shape[-1:] == (groups,)
    if zp.numel() != 1 and not (per_row or per_group):
        raise ValueError(f"{op}: zero_point of shape {tuple(zp.shape)} is neither one value, nor "
                         f"one per row ({rows} rows), nor one per group ({groups} a row)")
    flat = zp.reshape(-1).contiguous()
    if flat.dtype not in _ZERO_POINT:  # e.g. fp8 or f64: zero_point.to(qd) exactly, as f32
        flat = flat.to(to_torch(scheme.variant.quotient_dtype)).to(torch.float32)
    return flat


def variant_args_problem(op: str, args: dict[str, Any], vendor: str) -> str | None:
    """For supports_args: a variant that does not parse, or a zero point of a shape the
    contract does not give (per tensor: [] or [1]; per token: x's rows with a last dim 1)."""
    problem = variant_problem_beyond(args, vendor, ALL_FIELDS)
    if problem is not None:
        return problem
    zp, x = args.get("zero_point"), args.get("x")
    if zp is None or x is None:
        return None
    if tuple(zp.shape) in ((), (1,)):
        return None
    shapes = [(*x.shape[:-1], 1)]
    gs = args.get("group_size", 0)
    if _GRANULARITY.get(op, args.get("granularity")) == "group" and gs and x.shape[-1] is not None:
        shapes.append((*x.shape[:-1], x.shape[-1] // gs))
    if not any(zp.ndim == len(s) and all(a is None or b is None or a == b
                                         for a, b in zip(zp.shape, s, strict=True))
               for s in shapes):
        return (f"zero point shape {tuple(zp.shape)} is neither [] / [1] nor "
                f"{' nor '.join(str(s) for s in shapes)}")
    return None
