"""raise-native pattern for the act-and-mul family: `act(gate) * up` -> `vllm.<act>_and_mul`.

The activation is SiLU, GELU (erf) or GELU (tanh), as `aten.silu` / `aten.gelu(approximate=
"none" | "tanh")` or as Inductor's decompositions of them, computed in f32 and rounded back
to the activation dtype D; or FATReLU, `aten.threshold(gate, t, 0)` with a literal t (vLLM's
FatreluAndMul native), or its decomposition `where(gf <= t, 0, gf)` rounded back to D (exact
both: the comparison is in f32, as the contract's; t becomes the op's property):

- silu: `gf / (1 + exp(-gf))` (also `gf * sigmoid(gf)`);
- gelu: `(gf * 0.5) * (1 + erf(gf * M_SQRT1_2))`;
- gelu tanh: `(gf * 0.5) * (1 + tanh((gf + gf * gf * gf * 0.044715) * sqrt(2 / pi)))`;

(products and sums in either operand order). The contract computes the activation and the
product in D, as torch does (f32 inside, rounded to D once each), so the activation's result
and the product must both have D, the dtype of gate and up. The decomposed forms round at
the same points but are not bit-exact: exp, erf, tanh and the division differ from torch's
vectorised kernels by f32 ulps (the default level; `exact=true` takes aten ops only).

Gate and up: when they are the two halves of one tensor's static last dimension (slice,
split, chunk) the op takes that tensor (`vllm.silu_and_mul %x`); otherwise any two tensors
of one type, of any rank (`vllm.silu_and_mul %gate up(%up : ...)`), which also covers the
halves in swapped order. Broadcasting products are not raised.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import torch
from xdsl.dialects.builtin import Float64Type, FloatAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from vllm_xdsl.core import catalog
from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.dialects.vllm import OPS_BY_NAME
from vllm_xdsl.transforms.ir.routing import RoutedPattern
from vllm_xdsl.transforms.raising import match as m

# activation -> its op (the catalog's); the constants of torch's gelu formulas (f32 literals).
_OP_OF = {s.activation: s.name for s in catalog.act_and_mul_specs()}
_SQRT1_2 = 0.70710678118654757
_SQRT_2_OVER_PI = 0.79788456080286541
_TANH_CUBIC = 0.044715


def half_of(v: SSAValue) -> tuple[SSAValue, int] | None:
    """(x, 0) if v is the first half of x's last dim, (x, 1) if the second half."""
    if (sl := m.call_of(v, "aten::slice.Tensor")) is not None:
        x = m.arg(sl, 0)
        if not isinstance(x, SSAValue) or m.kwarg_names(sl):
            return None
        dim, start, end = m.arg(sl, 1, default=0), m.arg(sl, 2, default=None), m.arg(sl, 3, default=None)
        step = m.arg(sl, 4, default=1)
        h = m.static_last_dim(x)
        if h is None or h % 2 or step != 1 or not m.is_last_dim(dim, x):
            return None
        d = h // 2
        if start in (0, None) and end == d:
            return x, 0
        if start == d and (end is None or (isinstance(end, int) and end >= h)):
            return x, 1
        return None
    if not isinstance(v, m.OpResult):
        return None
    op = v.op
    if not isinstance(op, CallOp) or len(op.results) != 2 or m.kwarg_names(op):
        return None
    x = m.arg(op, 0)
    if not isinstance(x, SSAValue) or (h := m.static_last_dim(x)) is None or h % 2:
        return None
    target, size, dim = op.target.data, m.arg(op, 1), m.arg(op, 2, default=0)
    halves = (
        (target == "aten::split.Tensor" and size == h // 2)
        or (target == "aten::split_with_sizes.default" and size == [h // 2, h // 2])
        or (target == "aten::chunk.default" and size == 2)
    )
    if not halves or not m.is_last_dim(dim, x):
        return None
    return x, v.index


_Props = dict[str, Attribute]


def _aten_activation(v: SSAValue) -> tuple[SSAValue, str, _Props] | None:
    """(g, activation, the op's properties) for `aten.silu(g)`, `aten.gelu(g, approximate=
    ...)` or `aten.threshold(g, t, 0)`."""
    if (op := m.call_of(v, "aten::silu.default")) is not None:
        g = m.arg(op, 0)
        return (g, "silu", {}) if isinstance(g, SSAValue) and len(op.args.data) == 1 else None
    if (op := m.call_of(v, "aten::gelu.default")) is not None:
        g, approximate = m.arg(op, 0), m.arg(op, 1, "approximate", default="none")
        if not isinstance(g, SSAValue) or m.kwarg_names(op) - {"approximate"}:
            return None
        activation = {"none": "gelu", "tanh": "gelu_tanh"}.get(approximate)
        return None if activation is None else (g, activation, {})
    if (op := m.call_of(v, "aten::threshold.default")) is not None:
        g, threshold, value = m.arg(op, 0), m.arg(op, 1), m.arg(op, 2)
        if not (isinstance(g, SSAValue) and m.is_number(threshold) and value == 0) \
                or m.kwarg_names(op):
            return None  # a threshold passed in at run time, or another replacement value
        return g, "fatrelu", _threshold_props(threshold)
    return None


def _activation_input(v: SSAValue) -> tuple[SSAValue, str, bool, _Props] | None:
    """(g, activation, exact, properties) if v is act(g) computed as torch does (in f32 for
    f16/bf16, rounded to g's dtype)."""
    if (found := _aten_activation(v)) is not None:
        return found[0], found[1], True, found[2]
    d = m.dtype(v)
    inner = v
    if (c := m.cast_of(v)) is not None:
        inner = c[0]
    if m.dtype(inner) != torch.float32:
        return None
    if (th := _threshold_where(inner)) is not None:
        g = m.as_f32_of(th[0])
        return (g, "fatrelu", True, th[1]) if g is not None and m.dtype(g) == d else None
    for activation, match in _DECOMPOSED.items():
        if (gf := match(inner)) is not None:
            g = m.as_f32_of(gf)
            return (g, activation, False, {}) if g is not None and m.dtype(g) == d else None
    return None


# --- Inductor's decompositions, in f32 ---------------------------------------------------------


def _is_f32(v: Any, c: float) -> bool:
    """v is a number whose f32 value is c's (torch multiplies an f32 tensor by f32(v))."""
    pack = struct.Struct("f")
    return m.is_number(v) and pack.pack(float(v)) == pack.pack(c)


def _binary(v: Any, target: str) -> list[Any] | None:
    op = m.call_of(v, target) if isinstance(v, SSAValue) else None
    return None if op is None else m.operands_of(op, 2)


def _times(v: Any, c: float) -> Any:
    """a for `a * c` or `c * a` (c a literal), else None."""
    args = _binary(v, "aten::mul.Tensor")
    if args is not None:
        for a, k in (args, args[::-1]):
            if _is_f32(k, c) and isinstance(a, SSAValue):
                return a
    return None


def _one_plus(v: Any, target: str) -> Any:
    """The argument of `target(a)` for `target(a) + 1` (either order), else None."""
    args = _binary(v, "aten::add.Tensor")
    if args is not None:
        for f, one in (args, args[::-1]):
            op = m.call_of(f, target) if isinstance(f, SSAValue) else None
            if op is not None and one == 1 and len(op.args.data) == 1:
                return m.arg(op, 0)
    return None


def _half_times(v: SSAValue, inner: str) -> tuple[SSAValue, Any] | None:
    """(gf, a) for `(gf * 0.5) * (1 + inner(a))`, either order."""
    args = _binary(v, "aten::mul.Tensor")
    if args is not None:
        for h, s in (args, args[::-1]):
            gf, a = _times(h, 0.5), _one_plus(s, inner)
            if gf is not None and a is not None:
                return gf, a
    return None


def _silu(v: SSAValue) -> SSAValue | None:
    """gf for `gf / (1 + exp(-gf))` or `gf * sigmoid(gf)`."""
    if (args := _binary(v, "aten::div.Tensor")) is not None:
        gf, den = args
        e = _one_plus(den, "aten::exp.default")
        neg = m.call_of(e, "aten::neg.default") if isinstance(e, SSAValue) else None
        return gf if neg is not None and m.arg(neg, 0) is gf else None
    if (args := _binary(v, "aten::mul.Tensor")) is not None:
        for gf, s in (args, args[::-1]):
            sig = m.call_of(s, "aten::sigmoid.default") if isinstance(s, SSAValue) else None
            if sig is not None and m.arg(sig, 0) is gf:
                return gf
    return None


def _gelu(v: SSAValue) -> SSAValue | None:
    found = _half_times(v, "aten::erf.default")
    return found[0] if found is not None and _times(found[1], _SQRT1_2) is found[0] else None


def _gelu_tanh(v: SSAValue) -> SSAValue | None:
    found = _half_times(v, "aten::tanh.default")
    if found is None:
        return None
    gf, a = found
    args = _binary(_times(a, _SQRT_2_OVER_PI), "aten::add.Tensor")  # gf + c * gf^3
    if args is None:
        return None
    for x, cubic in (args, args[::-1]):
        if x is gf and _is_cube(_times(cubic, _TANH_CUBIC), gf):
            return gf
    return None


def _threshold_props(threshold: Any) -> _Props:
    return {"threshold": FloatAttr(float(threshold), Float64Type())}


def _threshold_where(v: SSAValue) -> tuple[SSAValue, _Props] | None:
    """(gf, properties) for `where(gf <= t, 0, gf)` (aten.threshold decomposed), t literal."""
    if (w := m.call_of(v, "aten::where.self")) is None or (args := m.operands_of(w, 3)) is None:
        return None
    cond, zero, gf = args
    le = m.call_of(cond, "aten::le.Scalar") if isinstance(cond, SSAValue) else None
    if le is None or m.operands_of(le, 2) is None or m.arg(le, 0) is not gf:
        return None
    threshold = m.arg(le, 1)
    if not m.is_number(threshold) or m.constant_value(zero) != 0:
        return None
    return gf, _threshold_props(threshold)


def _is_cube(v: Any, gf: SSAValue) -> bool:
    """v is `gf * gf * gf` (as `(gf * gf) * gf`, either order)."""
    args = _binary(v, "aten::mul.Tensor")
    if args is None:
        return False
    for sq, x in (args, args[::-1]):
        if x is gf and _binary(sq, "aten::mul.Tensor") == [gf, gf]:
            return True
    return False


_DECOMPOSED = {"silu": _silu, "gelu": _gelu, "gelu_tanh": _gelu_tanh}


@dataclass
class RaiseActAndMul(RoutedPattern):
    exact: bool = False  # aten activations only (decomposed ones differ by f32 ulps)
    TARGETS = ("aten::mul.Tensor",)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CallOp, rewriter: PatternRewriter) -> None:
        if op.target.data not in self.TARGETS or (args := m.operands_of(op, 2)) is None:
            return
        out = op.results[0]
        for s, u in (args, args[::-1]):
            if not (isinstance(s, SSAValue) and isinstance(u, SSAValue)):
                return
            found = _activation_input(s)
            if found is None or (self.exact and not found[2]):
                continue
            g, activation, _, props = found
            dt = m.dtype(g)
            if dt not in m.ACTIVATION_DTYPES or not all(m.dtype(v) == dt for v in (s, u, out)):
                continue
            if not (m.shape(g) == m.shape(u) == m.shape(out)):  # no broadcasting
                continue
            first, second = half_of(g), half_of(u)
            cls = OPS_BY_NAME[_OP_OF[activation]]
            if first is not None and second is not None and first[0] is second[0] \
                    and (first[1], second[1]) == (0, 1):
                new = cls.build(operands=[first[0], []], result_types=[out.type],
                                properties=props)
            else:
                new = cls.build(operands=[g, [u]], result_types=[out.type], properties=props)
            rewriter.replace(op, new)
            return
