"""raise-native patterns for RMSNorm: the HF decomposition -> `vllm.rms_norm` /
`vllm.fused_add_rms_norm`.

The decomposition is raised in small steps, each of which computes exactly what it
replaces (OPS.md contract: `y = xf * rsqrt(mean(xf^2, -1) + eps)`, then
`y.to(weight.dtype) * weight`, then `.to(x.dtype)`):

1. `RaiseRmsNormCore`: the fp32 core `xf * rsqrt(mean(xf^2, -1, keepdim) + eps)` becomes
   `rms_norm(xf)` on the fp32 value (the contract on an f32 input is exactly the core).
   `xf / sqrt(...)` is raised too, but differs from `* rsqrt` by an f32 ulp (inexact).
2. `RaiseNormWeight`: `rms_norm(x) * w` absorbs the weight when that is the contract:
   same dtype (`y.to(D) * w`, w of dtype D), or an f32 norm times a f16/bf16 weight
   (torch promotes w to f32 exactly, so the weight becomes `w.to(f32)`). An f32 weight on
   a bf16 norm output (HF with an un-cast f32 weight: result f32) is not the contract.
3. `RaiseNormCastBack`: `rms_norm(x.float()).to(x.dtype)` -> `rms_norm(x)` (f32 weight kept),
   and `rms_norm(a.float() + r.float()).to(D)` -> `fused_add_rms_norm(a, r)` (vLLM's native).
4. `RaiseResidualAdd` (residual_add.py, shared with fuse-norm-quant): `rms_norm(a + r)` ->
   `fused_add_rms_norm(a, r)`, the sum's other users read `residual_out`; an f16/bf16 add
   as the `rounded_sum` variant, which computes exactly what the graph does.

Anything else (a mean over another dim, no keepdim, eps after the rsqrt, an eps that is
not a scalar) stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.dialects.vllm import (
    FusedAddRmsNormOp,
    FusedAddRmsNormSignature,
    ResidualNormOp,
    RmsNormOp,
    RmsNormSignature,
    has_rounded_sum,
)
from vllm_xdsl.transforms.ir.placement import erase_if_dead
from vllm_xdsl.transforms.ir.routing import RoutedPattern
from vllm_xdsl.transforms.raising import match as m
from vllm_xdsl.transforms.raising.build import Epsilon, build_norm, cast_op, epsilon_of
from vllm_xdsl.transforms.raising.residual_add import RaiseResidualAdd

F32 = torch.float32


@dataclass(frozen=True)
class Core:
    xf: SSAValue
    eps: Epsilon
    exact: bool


def _same_source(a: SSAValue, b: SSAValue) -> bool:
    if a is b:
        return True
    src = m.as_f32_of(a)
    return src is not None and src is m.as_f32_of(b)


def _variance(v: SSAValue, xf: SSAValue) -> bool:
    """`v` is `mean(xf^2, dim=-1, keepdim=True)` (pow 2 or xf * xf)."""
    mean = m.call_of(v, "aten::mean.dim")
    if mean is None or m.arg(mean, 3, "dtype", None) is not None:
        return False
    p, dims, keepdim = m.arg(mean, 0), m.arg(mean, 1, "dim"), m.arg(mean, 2, "keepdim", False)
    if not isinstance(p, SSAValue) or keepdim is not True:
        return False
    if not (isinstance(dims, list) and len(dims) == 1 and m.is_last_dim(dims[0], p)):
        return False
    if (pw := m.call_of(p, "aten::pow.Tensor_Scalar")) is not None:
        args = m.operands_of(pw, 2)
        return args is not None and args[1] == 2 and _same_source(args[0], xf)
    if (sq := m.call_of(p, "aten::mul.Tensor")) is not None:
        args = m.operands_of(sq, 2)
        return args is not None and _same_source(args[0], xf) and _same_source(args[1], xf)
    return False


def _denominator(v: SSAValue, xf: SSAValue) -> Epsilon | None:
    """`v` is `variance(xf) + eps`, computed in f32 with a scalar eps."""
    add = m.call_of(v, "aten::add.Tensor")
    args = None if add is None else m.operands_of(add, 2)
    if args is None or m.dtype(v) != F32:
        return None
    for var, e in (args, args[::-1]):
        if isinstance(var, SSAValue) and var.type == v.type and _variance(var, xf):
            return epsilon_of(e)
    return None


def match_core(y: SSAValue) -> Core | None:
    """`y = xf * rsqrt(mean(xf^2, -1, keepdim) + eps)` (or `xf / sqrt(...)`), all in f32."""
    if m.dtype(y) != F32:
        return None
    if (op := m.call_of(y, "aten::mul.Tensor", "aten::div.Tensor")) is None:
        return None
    args = m.operands_of(op, 2)
    if args is None or not all(isinstance(a, SSAValue) for a in args):
        return None
    is_mul = op.target.data == "aten::mul.Tensor"
    pairs = (args, args[::-1]) if is_mul else (args,)
    root = "aten::rsqrt.default" if is_mul else "aten::sqrt.default"
    for xf, r in pairs:
        if (rs := m.call_of(r, root)) is None or xf.type != y.type:
            continue
        d = m.arg(rs, 0)
        eps = _denominator(d, xf) if isinstance(d, SSAValue) else None
        if eps is not None:
            return Core(xf, eps, exact=is_mul)
    return None


@dataclass
class RaiseRmsNormCore(RoutedPattern):
    exact: bool = False  # only the `* rsqrt` core (a `/ sqrt` differs by an f32 ulp)
    TARGETS = ("aten::mul.Tensor", "aten::div.Tensor")

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CallOp, rewriter: PatternRewriter) -> None:
        if op.target.data not in self.TARGETS or len(op.results) != 1:
            return
        core = match_core(op.results[0])
        if core is None or (self.exact and not core.exact):
            return
        rewriter.replace(op, build_norm(core.xf, None, None, core.eps, op.results[0].type))


@dataclass
class RaiseNormWeight(RoutedPattern):
    TARGETS = ("aten::mul.Tensor",)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CallOp, rewriter: PatternRewriter) -> None:
        if op.target.data not in self.TARGETS or (args := m.operands_of(op, 2)) is None:
            return
        for n, w in (args, args[::-1]):
            if not (isinstance(n, SSAValue) and isinstance(w, SSAValue)):
                return
            norm = n.op if isinstance(n, m.OpResult) else None
            if isinstance(norm, (RmsNormOp, FusedAddRmsNormOp)) and n is norm.out:
                self._absorb(op, norm, w, rewriter)
                return

    def _absorb(
        self,
        op: CallOp,
        norm: RmsNormSignature | FusedAddRmsNormSignature,
        w: SSAValue,
        rewriter: PatternRewriter,
    ) -> None:
        n, out = norm.out, op.results[0]
        if norm.weight is not None or not m.single_use(n) or m.shape(out) != m.shape(n):
            return
        hidden = m.static_last_dim(n)
        if m.rank(w) != 1 or hidden is None or m.shape(w) != (hidden,):
            return
        d, wd, rd = m.dtype(n), m.dtype(w), m.dtype(out)
        new_ops: list[Operation] = []
        if wd == d and rd == d:
            weight = w
        elif d == F32 and rd == F32 and wd in (torch.float16, torch.bfloat16):
            new_ops.append(cast_op(w, F32))  # torch promotes w to f32 exactly
            weight = new_ops[0].results[0]
            weight.name_hint = f"{w.name_hint or 'weight'}_f32"
        else:
            return
        residual = norm.residual if isinstance(norm, ResidualNormOp) else None
        if isinstance(norm, ResidualNormOp) and not m.uses_after(norm.residual_out, op):
            return
        new = build_norm(
            norm.x, residual, weight, Epsilon.of(norm), out.type,
            norm.variance_size if isinstance(norm, RmsNormSignature) else None,
            has_rounded_sum(norm),
        )
        rewriter.replace(op, [*new_ops, new], [new.results[0]])
        if isinstance(norm, ResidualNormOp):
            rewriter.replace_all_uses_with(norm.residual_out, new.results[1])
        rewriter.erase(norm)


@dataclass
class RaiseNormCastBack(RoutedPattern):
    TARGETS = m.CAST_TARGETS

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CallOp, rewriter: PatternRewriter) -> None:
        if op.target.data not in self.TARGETS:  # cast_of below needs one of these
            return
        out = op.results[0] if len(op.results) == 1 else None
        if out is None or (c := m.cast_of(out)) is None:
            return
        src, d = c
        norm = src.op if isinstance(src, m.OpResult) else None
        if not isinstance(norm, RmsNormOp) or not m.single_use(src) or d not in m.ACTIVATION_DTYPES:
            return
        if m.dtype(src) != F32 or d == F32:
            return
        if norm.weight is not None and m.dtype(norm.weight) != F32:
            return
        eps, vs = Epsilon.of(norm), norm.variance_size
        x0 = m.as_f32_of(norm.x)
        if x0 is not None and x0 is not norm.x and m.dtype(x0) == d:
            rewriter.replace(op, build_norm(x0, None, norm.weight, eps, out.type, vs))
            rewriter.erase(norm)
            return
        s = norm.x
        add = m.call_of(s, "aten::add.Tensor")
        args = None if add is None or vs is not None else m.operands_of(add, 2)
        if args is None or not all(isinstance(a, SSAValue) for a in args):
            return
        a, r = (m.as_f32_of(v) for v in args)
        if a is None or r is None or a is args[0] or r is args[1]:
            return
        if m.dtype(a) != d or a.type != out.type or r.type != out.type:
            return
        new = build_norm(a, r, norm.weight, eps, out.type)
        rewriter.replace(op, new, [new.results[0]])
        rewriter.erase(norm)
        # `s.to(D)` is residual_out exactly: its users after the fused op read that.
        for use in list(s.uses):
            rounded = use.operation.results[0] if len(use.operation.results) == 1 else None
            if rounded is not None and m.cast_of(rounded) == (s, d):
                rewriter.replace_uses_with_if(
                    rounded, new.results[1], lambda u: m.is_before(new, u.operation)
                )
                erase_if_dead(rounded, rewriter)
        erase_if_dead(s, rewriter)


NORM_PATTERNS = (RaiseRmsNormCore, RaiseNormWeight, RaiseNormCastBack, RaiseResidualAdd)
