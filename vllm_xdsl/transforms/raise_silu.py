"""raise-native pattern for SiLU-and-mul: `silu(x[..., :d]) * x[..., d:]` -> `vllm.silu_and_mul`.

The halves may come from `slice`, `split` or `chunk` (which AOTAutograd turns into
`split`), and SiLU may be `aten.silu` or Inductor's decomposition
`(xf / (1 + exp(-xf))).to(D)` (also `xf * sigmoid(xf)`). The contract computes SiLU and
the product in the dtype of x, as `aten.silu` does (fp32 inside, rounded to D), so the
result of the SiLU and of the product must both have x's dtype. The hidden size must be
static (2d) so the halves are provably the two halves.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.dialects.vllm import SiluAndMulOp
from vllm_xdsl.transforms import raise_match as m

_I64_MAX = 2**63 - 1


def _half(v: SSAValue) -> tuple[SSAValue, int] | None:
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


def _silu_input(v: SSAValue) -> tuple[SSAValue, bool] | None:
    """(g, exact) if v is silu(g) computed as aten.silu does (in f32 for f16/bf16, rounded
    to g's dtype). The decomposed forms are not bit-exact: exp and the division differ
    from aten.silu's vectorised kernel by f32 ulps."""
    if (op := m.call_of(v, "aten::silu.default")) is not None:
        g = m.arg(op, 0)
        return (g, True) if isinstance(g, SSAValue) and len(op.args.data) == 1 else None
    d = m.dtype(v)
    inner = v
    if (c := m.cast_of(v)) is not None:
        inner = c[0]
    if m.dtype(inner) != torch.float32:
        return None
    gf = _decomposed_silu(inner)
    if gf is None:
        return None
    g = m.as_f32_of(gf)
    if g is None or m.dtype(g) != d:
        return None
    return g, False


def _decomposed_silu(v: SSAValue) -> SSAValue | None:
    """gf for `gf / (1 + exp(-gf))` or `gf * sigmoid(gf)` (in f32)."""
    if (div := m.call_of(v, "aten::div.Tensor")) is not None:
        args = m.operands_of(div, 2)
        if args is None or not isinstance(args[0], SSAValue):
            return None
        gf, den = args
        add = m.call_of(den, "aten::add.Tensor") if isinstance(den, SSAValue) else None
        add_args = None if add is None else m.operands_of(add, 2)
        if add_args is None or add_args[1] != 1:
            return None
        exp = m.call_of(add_args[0], "aten::exp.default")
        neg = None if exp is None else m.call_of(m.arg(exp, 0), "aten::neg.default")
        return gf if neg is not None and m.arg(neg, 0) is gf else None
    if (mul := m.call_of(v, "aten::mul.Tensor")) is not None:
        args = m.operands_of(mul, 2)
        if args is None:
            return None
        for gf, s in (args, args[::-1]):
            sig = m.call_of(s, "aten::sigmoid.default") if isinstance(s, SSAValue) else None
            if sig is not None and m.arg(sig, 0) is gf:
                return gf
    return None


@dataclass
class RaiseSiluAndMul(RewritePattern):
    exact: bool = False
    approx: bool = False

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CallOp, rewriter: PatternRewriter) -> None:
        if op.target.data != "aten::mul.Tensor" or (args := m.operands_of(op, 2)) is None:
            return
        out = op.results[0]
        for s, u in (args, args[::-1]):
            if not (isinstance(s, SSAValue) and isinstance(u, SSAValue)):
                return
            silu = _silu_input(s)
            if silu is None or (self.exact and not silu[1]):
                continue
            first, second = _half(silu[0]), _half(u)
            if first is None or second is None or first[0] is not second[0]:
                continue
            if (first[1], second[1]) != (0, 1):
                continue
            x = second[0]
            dt = m.dtype(x)
            if dt not in m.ACTIVATION_DTYPES or m.dtype(s) != dt or m.dtype(out) != dt:
                continue
            if m.shape(out) != m.shape(u):
                continue
            rewriter.replace(op, SiluAndMulOp(operands=[x], result_types=[out.type]))
            return
