"""raise-native: what a dynamic quant scale is, read from the ops that compute it.

`dynamic_scale(s, xs, qmax)` walks back from the scale a quotient divides by and answers
with the exact scheme pieces (docs/OPS.md "Variants"), or None when the computation is not
one of them. The forms, from the scale backwards:

- floor: `clamp_min(t, 1 / (FMAX * 512))` in f32 (min_scale; `clamp(min=)` too), or
  `where(t == 0, eps, t)` (zero_eps, eps a recorded constant: compressed-tensors), or, per
  group, none after the division when the absmax is floored first (`clamp(a, min=eps)`);
- ue8m0 (per group): `exp2(ceil(log2(t)))` before the floor (vLLM's QuantFP8 native);
- `t = a / R`, R a number or a constant expression (compressed-tensors computes
  `(qmax - qmin).to(dtype) / 2`); the dtype the division and the casts after it round to
  is the scale dtype; R other than FMAX / IMAX is the `range` variant;
- `a = min(absmax, scale_ub)` (per-token fp8 only), absmax over the last dimension of the
  quotient's numerator (`amax(abs(.), -1, keepdim)`, `max(abs(.), -1)` values or
  `amax(abs(.), -1)` + unsqueeze (vLLM's QuantFP8 per token),
  compressed-tensors' `max(|min(amin, 0)|, |max(amax, 0)|)`), or over all of it
  (`max(abs(x))` / `amax(abs(x))` reshaped to [1]: per tensor);
- per group, also without the kept dimension: compressed-tensors reduces its groups with
  `keepdim=False`, computes the scale on [..., G] and divides by `scale.unsqueeze(-1)`
  (the group split `x.unflatten(-1, (G, gs))` done twice, once for each).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from xdsl.ir import SSAValue

from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS, Granularity
from vllm_xdsl.core.variant import Floor
from vllm_xdsl.transforms.raising import match as m

F32 = torch.float32


def f32(v: float) -> float:
    return torch.tensor(v, dtype=F32).item()


@dataclass(frozen=True)
class DynamicScale:
    """The pieces of a dynamic scale, in QuantScheme / QuantVariant terms."""

    granularity: Granularity
    scale: SSAValue  # the floored scale, whose other users get the op's scales
    scale_dtype: torch.dtype
    floor: Floor
    floor_eps: float
    scale_range: float  # 0.0: FMAX / IMAX
    scale_ub: SSAValue | None
    use_ue8m0: bool = False
    group_eps: float = DEFAULT_GROUP_EPS
    scale_view: SSAValue | None = None  # `scale.unsqueeze(-1)` the quotient divides by


def _chain_dtype(v: SSAValue) -> tuple[SSAValue, torch.dtype | None]:
    """(the value below the casts, the one narrow dtype the chain rounds to, f32 if none);
    dtype None when it rounds to two different narrow dtypes (no single scale dtype)."""
    narrow = set()
    while True:
        d = m.dtype(v)
        if d is not None and m.MANTISSA_BITS.get(d, 0) < m.MANTISSA_BITS[F32]:
            narrow.add(d)
        c = m.cast_of(v)
        if c is None:
            break
        v = c[0]
    if len(narrow) > 1:
        return v, None
    return v, (narrow.pop() if narrow else F32)


def _is_zero(v: object) -> bool:
    """A tensor of zeros: `full(shape, 0)`, `zeros_like`, or a zero constant."""
    if not isinstance(v, SSAValue):
        return False
    if (op := m.call_of(v, "aten::full.default")) is not None:
        return m.arg(op, 1) == 0
    if m.call_of(v, "aten::zeros_like.default", "aten::zeros.default") is not None:
        return True
    return m.constant_value(v) == 0.0


def _source(v: SSAValue) -> SSAValue:
    return m.widened_from(v)


def _reduced(op_value: SSAValue, target: str) -> tuple[SSAValue, bool] | None:
    """(input, keepdim) of a last-dim `amax`/`amin` (`.default` with dims [-1])."""
    op = m.call_of(op_value, target)
    if op is None:
        return None
    src, dims = m.arg(op, 0), m.arg(op, 1, "dim")
    if not isinstance(src, SSAValue) or not isinstance(dims, list) or len(dims) != 1:
        return None
    if not m.is_last_dim(dims[0], src):
        return None
    return src, m.arg(op, 2, "keepdim", False) is True


def _abs_of(v: object) -> SSAValue | None:
    op = m.call_of(v if isinstance(v, SSAValue) else None, "aten::abs.default")
    src = None if op is None else m.arg(op, 0)
    return _source(src) if isinstance(src, SSAValue) else None


def row_absmax_of(a: SSAValue, keepdim: bool = True) -> SSAValue | None:
    """x for a last-dim absmax with the kept dimension (or, `keepdim=False`, without it), in
    any of its spellings."""
    a = m.widened_from(a)
    if (r := _reduced(a, "aten::amax.default")) is not None:
        return _abs_of(r[0]) if r[1] == keepdim else None
    if keepdim and (un := m.call_of(a, "aten::unsqueeze.default")) is not None:
        inner = m.arg(un, 0)
        if not isinstance(inner, SSAValue) or not m.is_last_dim(m.arg(un, 1), un.results[0]):
            return None
        if (r := _reduced(inner, "aten::amax.default")) is not None:  # vLLM's QuantFP8
            return None if r[1] else _abs_of(r[0])
        mx = m.call_of(inner, "aten::max.dim")
        if mx is None or inner is not mx.results[0] or m.arg(mx, 2, "keepdim", False):
            return None
        src = m.arg(mx, 0)
        return _abs_of(src) if isinstance(src, SSAValue) and m.is_last_dim(m.arg(mx, 1), src) \
            else None
    if (mx := m.call_of(a, "aten::max.dim")) is not None:
        src = m.arg(mx, 0)
        ok = a is mx.results[0] and (m.arg(mx, 2, "keepdim", False) is True) == keepdim
        return _abs_of(src) if ok and isinstance(src, SSAValue) and m.is_last_dim(
            m.arg(mx, 1), src) else None
    return _minmax_absmax(a, keepdim)


def _minmax_absmax(a: SSAValue, keepdim: bool = True) -> SSAValue | None:
    """compressed-tensors: `max(|min(amin(x), 0)|, |max(amax(x), 0)|)` is absmax (both
    reductions with the kept dimension, or both without it)."""
    op = m.call_of(a, "aten::maximum.default")
    args = None if op is None else m.operands_of(op, 2)
    if args is None:
        return None
    found: dict[str, SSAValue] = {}
    for v in args:
        inner = m.call_of(v, "aten::abs.default")
        bound = None if inner is None else m.arg(inner, 0)
        clip = m.call_of(bound, "aten::minimum.default", "aten::maximum.default")
        pair = None if clip is None else m.operands_of(clip, 2)
        if clip is None or pair is None or not _is_zero(pair[1]) or not isinstance(pair[0], SSAValue):
            return None
        kind = "min" if clip.target.data == "aten::minimum.default" else "max"
        r = _reduced(pair[0], f"aten::a{kind}.default")
        if r is None or r[1] != keepdim:
            return None
        found[kind] = r[0]
    if set(found) != {"min", "max"} or found["min"] is not found["max"]:
        return None
    return _source(found["min"])


def tensor_absmax_of(a: SSAValue) -> SSAValue | None:
    """x for `max(abs(x))` / `amax(abs(x))` as a [1] tensor (unsqueeze or reshape)."""
    a = m.widened_from(a)
    if m.shape(a) != (1,):
        return None
    op = m.call_of(a, "aten::unsqueeze.default", "aten::reshape.default", "aten::view.default")
    inner = None if op is None else m.arg(op, 0)
    if not isinstance(inner, SSAValue) or m.shape(inner) != ():
        return None
    red = m.call_of(inner, "aten::max.default", "aten::amax.default")
    if red is None:
        return None
    if red.target.data == "aten::amax.default" and m.arg(red, 1, "dim", []) not in ([], None):
        return None
    return _abs_of(m.arg(red, 0))


def _upper_bound(a: SSAValue) -> tuple[SSAValue, SSAValue | None]:
    """(a0, ub) for `minimum(a0, ub)` / `clamp(a0, max=ub)` with a [1] ub, else (a, None)."""
    op = m.call_of(a, "aten::minimum.default", "aten::clamp_max.Tensor", "aten::clamp.Tensor")
    if op is None or m.kwarg_names(op) - {"min", "max"}:
        return a, None
    a0 = m.arg(op, 0)
    if op.target.data == "aten::clamp.Tensor":
        if m.arg(op, 1, "min", None) is not None:
            return a, None
        ub = m.arg(op, 2, "max", None)
    else:
        ub = m.arg(op, 1, "max" if op.target.data.startswith("aten::clamp") else "other")
    if not (isinstance(a0, SSAValue) and isinstance(ub, SSAValue)) or m.dtype(a) != F32:
        return a, None
    if m.shape(ub) != (1,) or m.dtype(ub) not in m.MANTISSA_BITS:
        return a, None
    return a0, ub


def _floor(s: SSAValue, qmax: float) -> tuple[SSAValue, Floor, float] | None:
    """(value below the floor, floor kind, eps) for the floors of the module doc."""
    op = m.call_of(s, "aten::clamp_min.default", "aten::clamp.default", "aten::where.self")
    if op is None:
        return s, "", 0.0
    if op.target.data == "aten::where.self":
        cond, eps, t = m.arg(op, 0), m.arg(op, 1), m.arg(op, 2)
        eq = m.call_of(cond, "aten::eq.Scalar")
        value = m.constant_value(eps)
        if eq is None or m.arg(eq, 0) is not t or m.arg(eq, 1) != 0 or not value or value < 0:
            return None
        return (t, "zero_eps", value) if isinstance(t, SSAValue) else None
    t, lo = m.arg(op, 0), m.arg(op, 1, "min", None)
    hi = None if op.target.data == "aten::clamp_min.default" else m.arg(op, 2, "max", None)
    if hi is not None or not m.is_number(lo) or not isinstance(t, SSAValue):
        return None
    if f32(lo) != f32(1.0 / (qmax * 512.0)) or m.dtype(s) != F32:
        return None
    return t, "min_scale", 0.0


def _ue8m0(t: SSAValue) -> SSAValue | None:
    e = m.call_of(t, "aten::exp2.default")
    c = None if e is None else m.call_of(m.arg(e, 0), "aten::ceil.default")
    lg = None if c is None else m.call_of(m.arg(c, 0), "aten::log2.default")
    src = None if lg is None else m.arg(lg, 0)
    return src if isinstance(src, SSAValue) and m.dtype(t) == F32 else None


def dynamic_scale(
    s: SSAValue, xs: SSAValue, qmax: float, is_fp8: bool, grouped: bool
) -> DynamicScale | None:
    """The dynamic scale `s` of a quotient with numerator `xs` (x, or x grouped as
    [..., G, gs] when `grouped`), or None if it is none of the module doc's forms."""
    node = m.widened_from(s)
    scale_view = None
    if grouped and (un := m.call_of(node, "aten::unsqueeze.default")) is not None:
        inner, xs_shape = m.arg(un, 0), m.shape(xs)
        if not (isinstance(inner, SSAValue) and m.is_last_dim(m.arg(un, 1), node)
                and xs_shape is not None and m.shape(inner) == xs_shape[:-1]):
            return None
        scale_view, node = node, inner  # computed on [..., G], divided as [..., G, 1]
    floored = _floor(node, qmax)
    if floored is None:
        return None
    t, floor, eps = floored
    ue8m0 = _ue8m0(t)
    if ue8m0 is not None:
        t = ue8m0
    div_value, scale_dtype = _chain_dtype(t)
    if scale_dtype is None or m.dtype(node) != scale_dtype:
        return None  # the floored scale must be a value of the scale dtype (OPS.md)
    div = m.call_of(div_value, "aten::div.Tensor")
    args = None if div is None else m.operands_of(div, 2)
    if args is None or not isinstance(args[0], SSAValue):
        return None
    r = m.constant_value(args[1])
    if r is None or r <= 0:
        return None
    a, group_eps = args[0], DEFAULT_GROUP_EPS
    if not floor:
        # Only the per-group contract has no floor after the division: it floors the absmax.
        lo = m.call_of(a, "aten::clamp_min.default", "aten::clamp.default")
        if not grouped or lo is None or not m.is_number(m.arg(lo, 1, "min", None)):
            return None
        if lo.target.data == "aten::clamp.default" and m.arg(lo, 2, "max", None) is not None:
            return None
        a, group_eps = m.arg(lo, 0), float(m.arg(lo, 1, "min"))
        if not isinstance(a, SSAValue) or m.dtype(a) != F32:
            return None
    a, ub = _upper_bound(a)
    x = _source(xs)
    granularity: Granularity
    if grouped:
        granularity = "group"
        src = row_absmax_of(a, keepdim=scale_view is None)
        ok = src is not None and m.same_value(src, x) and ub is None and is_fp8
    elif tensor_absmax_of(a) is x:
        granularity, ok = "tensor", ub is None and is_fp8
    else:
        granularity = "token"
        ok = row_absmax_of(a) is x and (ub is None or is_fp8)
    if not ok or (ue8m0 is not None and not grouped):
        return None
    scale_range = 0.0 if f32(r) == f32(qmax) else r
    return DynamicScale(granularity, node, scale_dtype, floor, eps, scale_range, ub,
                        ue8m0 is not None, group_eps, scale_view)
