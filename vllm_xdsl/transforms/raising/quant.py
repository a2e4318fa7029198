"""raise-native patterns for quantization -> the unfused `vllm.*_quant` ops, each with the
exact variant its source computes (docs/OPS.md "Variants"; quant_scale.py reads the
dynamic scales).

A quant ends in one of (bounds are numbers or 0-d constants, casts may sit anywhere):

- fp8: `clamp(v, -FMAX, FMAX).to(fp8)`, FMAX of the result's fp8 type (448 e4m3fn, 224
  e4m3fnuz); `clamp` or `clamp_min` + `clamp_max`;
- int8: `round(v)` and `clamp(-128, 127)` in either order (they commute for integer
  bounds), then `.to(int8)`; or with no cast at all (compressed-tensors keeps the rounded
  values in the activation dtype: the raised op's int8 `q` is cast back to that dtype).

Before it, `v = (x / s)` or `x * reciprocal(s)` (an f32 reciprocal), optionally `+ zp` (a
runtime zero point, per tensor, per token, or per group: one per row of the grouped x,
compressed-tensors' FP8_BLOCK activations; the op's zero point is then x's leading dims
and G). Every rounding between the division and the
clamp is read from the dtypes the chain passes through: the quotient's dtype (a bf16
division rounds its f32 quotient to bf16) and the zero-point add's must be one dtype, the
`quotient` variant. A rounding after the clamp commutes with it (the bounds are exact in
every float dtype), so it counts as the quotient's. A scale rounded before the division (a
0-d f32 scale divided into bf16 values) or two different narrow dtypes in one chain match
no variant: not raised.

The scale: a [1] value not computed here -> static; else quant_scale.dynamic_scale
(per tensor, per token, per group; the group form quantizes `x.view(..., G, gs)`). The
dynamic scale's other users read the raised op's scales, reshaped to their shape.

Any activation rank: a per-token scale of `[B, T, 1]` is the op's `[B*T, 1]` scales
unflattened. Any number of its leading dims may be symbolic (`dynamic=True` with a batch
above 1): one is a reshape's -1, more are read off the op's q (x's shape) with
`aten.sym_size`, so that x keeps its one use and the quant can still fuse with the op that
computes x. Per group, at most one dynamic dim: the group view `x.view(s0, s1, G, gs)`
names its own sizes, which the IR cannot prove to be x's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from xdsl.dialects.builtin import DYNAMIC_INDEX, BoolAttr, Float64Type, FloatAttr, IntegerAttr, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.core.dtypes import DType, quant_max
from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS, QuantScheme
from vllm_xdsl.core.variant import QuantVariant, Scaling
from vllm_xdsl.dialects import vllm
from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.dialects.types import tensor_type
from vllm_xdsl.dialects.vllm_attrs import QuantVariantAttr
from vllm_xdsl.ops.dtypes import to_torch
from vllm_xdsl.transforms.ir.routing import RoutedPattern
from vllm_xdsl.transforms.ir.torch_builder import TorchBuilder, meta
from vllm_xdsl.transforms.raising import match as m
from vllm_xdsl.transforms.raising.quant_scale import DynamicScale, dynamic_scale

F32 = torch.float32
_CLAMPS = ("aten::clamp.default", "aten::clamp_min.default", "aten::clamp_max.default",
           "aten::clamp.Tensor", "aten::clamp_min.Tensor", "aten::clamp_max.Tensor")


def _narrow(v: SSAValue) -> torch.dtype | None:
    d = m.dtype(v)
    return d if d is not None and m.MANTISSA_BITS.get(d, 99) < m.MANTISSA_BITS[F32] else None


@dataclass
class _Saturation:
    """What the walk from the quantized value back to the clamped value found."""

    value: SSAValue  # the value below the clamp, casts and round
    rounded: set[torch.dtype]  # narrow dtypes between it and the clamp (it included)
    rounds: int = 0
    lo: bool = False
    hi: bool = False


def _clamp_bounds(op: CallOp) -> tuple[object, object] | None:
    kind = op.target.data.split("::")[1].split(".")[0]
    if kind == "clamp":
        return m.arg(op, 1, "min", None), m.arg(op, 2, "max", None)
    if kind == "clamp_min":
        return m.arg(op, 1, "min"), None
    return None, m.arg(op, 1, "max")


def _saturated(v: SSAValue, lo: float, hi: float, int8: bool) -> _Saturation | None:
    """Walk up casts, the clamp (bounds lo/hi) and, for int8, one round."""
    sat = _Saturation(v, set())
    while True:
        if int8 and sat.rounds == 0:
            sat.rounded.clear()  # after the round the values are integers: exact anywhere
        if (n := _narrow(v)) is not None:
            sat.rounded.add(n)
        if (c := m.cast_of(v)) is not None:
            v = c[0]
            continue
        if int8 and (r := m.call_of(v, "aten::round.default")) is not None and sat.rounds == 0:
            src = m.arg(r, 0)
            if not isinstance(src, SSAValue) or m.kwarg_names(r):
                return None
            sat.rounds, v = 1, src
            continue
        op = m.call_of(v, *_CLAMPS)
        if op is None:
            break
        bounds, x = _clamp_bounds(op), m.arg(op, 0)
        if bounds is None or bounds == (None, None) or not isinstance(x, SSAValue):
            return None
        for bound, want, seen in ((bounds[0], lo, "lo"), (bounds[1], hi, "hi")):
            if bound is None:
                continue
            if getattr(sat, seen) or m.constant_value(bound) != want:
                return None
            setattr(sat, seen, True)
        v = x
    sat.value = v
    if int8 and sat.rounds == 0:
        return None
    return sat if sat.lo and sat.hi else None


def _exactly_converted(inputs: list[SSAValue], out: SSAValue) -> bool:
    """Every input converts to the op's dtype without rounding (torch computes in it)."""
    d = m.dtype(out)
    return all((m.dtype(i), d) in m.EXACT_WIDENING for i in inputs)


def _quotient(v: SSAValue) -> tuple[SSAValue, SSAValue, Scaling, set[torch.dtype]] | None:
    """(numerator, scale, "div"/"recip", narrow dtypes from the division up to v)."""
    rounded: set[torch.dtype] = set()
    while True:
        if (n := _narrow(v)) is not None:
            rounded.add(n)
        c = m.cast_of(v)
        if c is None:
            break
        v = c[0]
    op = m.call_of(v, "aten::div.Tensor", "aten::mul.Tensor")
    args = None if op is None else m.operands_of(op, 2)
    if op is None or args is None or not all(isinstance(a, SSAValue) for a in args):
        return None
    if op.target.data == "aten::div.Tensor":
        return (args[0], args[1], "div", rounded) if _exactly_converted(args, v) else None
    for xs, r in (args, args[::-1]):
        rec = m.call_of(r, "aten::reciprocal.default")
        s = None if rec is None else m.arg(rec, 0)
        if rec is not None and m.dtype(r) == F32 and isinstance(s, SSAValue):
            if _exactly_converted([xs, r], v) and _exactly_converted([s], r):
                return xs, s, "recip", rounded
    return None


def _zero_point(v: SSAValue, x_shape: tuple[int, ...] | None) -> tuple[SSAValue, SSAValue] | None:
    """(y, zp) for `y + zp` with zp per tensor or per token (the smaller operand)."""
    op = m.call_of(v, "aten::add.Tensor")
    args = None if op is None else m.operands_of(op, 2)
    if args is None or not all(isinstance(a, SSAValue) for a in args):
        return None
    for y, zp in (args, args[::-1]):
        zs = m.shape(zp)
        if m.shape(y) == x_shape and zs is not None and x_shape is not None and (
            zs in ((), (1,)) or zs == (*x_shape[:-1], 1)
        ):
            return y, zp
    return None


def _grouped(xs: SSAValue) -> tuple[SSAValue, int] | None:
    """(x, group size) when the numerator is `x.view(..., G, gs)` (x's last dim split)."""
    v = m.widened_from(xs)
    op = m.call_of(v, "aten::view.default", "aten::reshape.default", "aten::unflatten.int",
                   "aten::_unsafe_view.default")
    src = None if op is None else m.arg(op, 0)
    if not isinstance(src, SSAValue) or m.rank(v) < 3 or m.rank(src) < 1:
        return None
    vs, ss = m.shape(v), m.shape(src)
    assert vs is not None and ss is not None
    if DYNAMIC_INDEX in (vs[-1], vs[-2], ss[-1]) or vs[-2] * vs[-1] != ss[-1]:
        return None  # the last dim split into G groups of gs (leading dims may flatten)
    return m.widened_from(src), vs[-1]


@dataclass
class RaiseQuant(RoutedPattern):
    """Every quant form of the module doc -> its unfused op with the exact variant."""

    TARGETS = (*m.CAST_TARGETS, "aten::round.default")

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CallOp, rewriter: PatternRewriter) -> None:
        target = op.target.data
        if len(op.results) != 1 or target not in self.TARGETS:
            return
        q = op.results[0]
        c = m.cast_of(q)
        if c is not None and c[1] in m.FP8_DTYPES + (torch.int8,):
            qdtype, start = c[1], c[0]
        elif target == "aten::round.default" and not _cast_to_int8_follows(q):
            qdtype, start = torch.int8, q  # compressed-tensors: rounded, never cast
        else:
            return
        plan = _plan(q, qdtype, start)
        if plan is not None:
            _rewrite(op, q, qdtype, plan, rewriter)


def _cast_to_int8_follows(q: SSAValue) -> bool:
    """The round's value is cast to int8: the cast is the end of that quant, not the round."""
    for use in q.uses:
        results = use.operation.results
        c = m.cast_of(results[0]) if len(results) == 1 else None
        if c is not None and c[1] == torch.int8:
            return True
    return False


@dataclass
class _Plan:
    x: SSAValue
    scheme: QuantScheme
    scale: SSAValue | None  # static
    zp: SSAValue | None
    dyn: DynamicScale | None
    group_shape: tuple[int, ...] | None  # the grouped q shape, to view the result back
    zp_shape: tuple[int, ...] | None = None  # a per-group zero point, as the op takes it


def _plan(q: SSAValue, qdtype: torch.dtype, start: SSAValue) -> _Plan | None:
    int8 = qdtype == torch.int8
    qmax = quant_max(qdtype)
    lo, hi = (-128.0, 127.0) if int8 else (-qmax, qmax)
    sat = _saturated(start, lo, hi, int8)
    if sat is None:
        return None
    v, after = sat.value, sat.rounded
    quotient = _quotient(v)
    zp = None
    if quotient is None:
        q_shape = m.shape(q)
        split = _zero_point(v, q_shape)
        if split is None or (quotient := _quotient(split[0])) is None:
            return None
        zp = split[1]
        if not _exactly_converted([split[0]], v):
            return None
    xs, s, scaling, before = quotient
    if zp is not None:
        if before != after or len(after) > 1:
            return None  # the quotient and the zero-point sum round to different dtypes
    else:
        before = before | after
    if len(before) > 1:
        return None
    qd = next(iter(before)) if before else F32
    if zp is not None and m.dtype(v) != qd and (m.dtype(zp), qd) not in m.EXACT_WIDENING:
        return None  # torch adds zp as the sum's dtype holds it; the variant as qd holds it
    grouped = _grouped(xs)
    x = grouped[0] if grouped else m.widened_from(xs)
    if m.dtype(x) not in m.ACTIVATION_DTYPES or m.shape(xs) != m.shape(q):
        return None
    dyn = dynamic_scale(s, xs, qmax, not int8, grouped is not None)
    if dyn is None and (grouped is not None or m.shape(s) != (1,) or m.dtype(s) not in
                        m.MANTISSA_BITS):
        return None
    zp_shape = None
    if grouped is not None and zp is not None and m.rank(zp) == m.rank(q):
        # One per group: [..., G, 1] in the grouped q -> x's leading dims and G.
        x_dims, q_dims = m.shape(x), m.shape(q)
        assert x_dims is not None and q_dims is not None
        zp_shape = (*x_dims[:-1], q_dims[-2])
        if sum(d == DYNAMIC_INDEX for d in zp_shape) > 1:
            return None
    # The shapes the op's results are reshaped back to: a per-token scale's leading dims are
    # x's (its rows' absmax); the group shapes' are the group view's (see the module doc).
    x_dims = m.shape(x)
    assert x_dims is not None
    rows = () if grouped else x_dims[:-1]
    views = (q if grouped else None, None if dyn is None else dyn.scale,
             None if dyn is None else dyn.scale_view)
    for value in views:
        if value is not None and not _sized_by(m.shape(value), rows):
            return None
    if dyn is None:
        variant = QuantVariant(scaling, DType.of(qd))
    else:
        variant = QuantVariant(scaling, DType.of(qd), DType.of(dyn.scale_dtype), dyn.floor, dyn.floor_eps,
                               dyn.scale_range)
    try:
        scheme = QuantScheme(
            qdtype, dyn is None, "tensor" if dyn is None else dyn.granularity,
            0 if grouped is None else grouped[1], False,
            dyn is not None and dyn.use_ue8m0, DEFAULT_GROUP_EPS if dyn is None else dyn.group_eps, variant,
        )
    except ValueError:
        return None
    return _Plan(x, scheme, m.widened_from(s) if dyn is None else None, zp, dyn,
                 m.shape(q) if grouped else None, zp_shape)


def _rewrite(op: CallOp, q: SSAValue, qdtype: torch.dtype, plan: _Plan,
             rewriter: PatternRewriter) -> None:
    x_shape = meta(plan.x)[1]
    scheme, dyn = plan.scheme, plan.dyn
    q_type = tensor_type(qdtype, x_shape)
    props: dict[str, Attribute] = {}
    if not scheme.variant.is_default:
        props["variant"] = QuantVariantAttr.from_variant(scheme.variant)
    pre = TorchBuilder()  # the zero point reshaped to the op's per-group shape, if need be
    zp = [] if plan.zp is None else [
        _reshaped(pre, plan.zp, plan.zp_shape or m.shape(plan.zp), plan.x)]
    sd = to_torch(scheme.variant.scale_dtype)
    tokens = _tokens(x_shape[:-1])
    new: Operation
    if dyn is None:
        cls = vllm.StaticScaledFp8QuantOp if scheme.is_fp8 else vllm.StaticScaledInt8QuantOp
        assert plan.scale is not None
        new = cls.build(operands=[plan.x, plan.scale, zp], result_types=[q_type],
                        properties=props)
    elif scheme.granularity == "tensor":
        new = vllm.DynamicScaledFp8QuantOp.build(
            operands=[plan.x, zp], result_types=[q_type, tensor_type(sd, (1,))], properties=props)
    elif scheme.granularity == "token":
        token_cls = (vllm.DynamicPerTokenScaledFp8QuantOp if scheme.is_fp8
                     else vllm.DynamicPerTokenScaledInt8QuantOp)
        ub = [] if dyn.scale_ub is None else [dyn.scale_ub]
        operands: list[SSAValue | list[SSAValue]] = (
            [plan.x, ub, zp] if scheme.is_fp8 else [plan.x, zp])
        new = token_cls.build(operands=operands, result_types=[q_type, tensor_type(sd, (tokens, 1))],
                        properties=props)
    else:
        hidden = x_shape[-1]
        assert hidden is not None  # _grouped split a static last dim
        groups = hidden // scheme.group_size
        props["group_size"] = IntegerAttr(scheme.group_size, i64)
        if scheme.use_ue8m0:
            props["use_ue8m0"] = BoolAttr.from_bool(True)
        if scheme.group_eps != DEFAULT_GROUP_EPS:
            props["eps"] = FloatAttr(scheme.group_eps, Float64Type())
        new = vllm.PerTokenGroupFp8QuantOp.build(
            operands=[plan.x, zp], result_types=[q_type, tensor_type(sd, (tokens, groups))],
            properties=props)
    try:
        new.verify()
    except VerifyException:
        return  # a form this module reads but the op cannot state: leave it
    b = TorchBuilder()
    qv: SSAValue = new.results[0]
    if plan.group_shape is not None:
        qv = _reshaped(b, qv, plan.group_shape, new.results[0])
    if m.dtype(q) != qdtype:  # compressed-tensors' int8: the rounded values in a float dtype
        float_dtype = m.dtype(q)
        assert float_dtype is not None
        qv = b.convert(qv, float_dtype)
    rewired = []  # the source scale's (and its unsqueeze's) users after the quant
    for source in () if dyn is None else (dyn.scale, dyn.scale_view):
        if source is not None:
            rewired.append((list(source.uses),
                            _reshaped(b, new.results[1], m.shape(source), new.results[0])))
    rewriter.insert([*pre.ops, new, *b.ops], InsertPoint.before(op))
    rewriter.replace(op, [], [qv])
    for users, scales in rewired:  # ... read the op's scales
        for use in users:
            if m.is_before(new, use.operation):
                use.operation.operands[use.index] = scales


def _tokens(leading: tuple[int | None, ...]) -> int | None:
    n: int | None = 1
    for d in leading:
        n = None if d is None or n is None else n * d
    return n


def _sized_by(shape: tuple[int, ...] | None, rows: tuple[int, ...]) -> bool:
    """A reshape to `shape` can be spelled: at most one dynamic dim (-1), or every dynamic
    dim among the leading dims `rows` (x's, which `shape`'s are by construction: the caller
    passes them only then), at the same place, so that it reads x's size there (_reshaped)."""
    if shape is None:
        return False
    dynamic = [i for i, d in enumerate(shape) if d == DYNAMIC_INDEX]
    if len(dynamic) <= 1:
        return True
    end = dynamic[-1] + 1
    return end <= len(rows) and rows[:end] == shape[:end]


def _reshaped(b: TorchBuilder, v: SSAValue, shape: tuple[int, ...] | None,
              sizes_of: SSAValue) -> SSAValue:
    """`v.reshape(shape)`; v itself if already that shape. One dynamic dim is -1; with more,
    each is `sizes_of`'s size at its place (the op's q, of x's shape: see _sized_by)."""
    assert shape is not None
    target = tuple(None if d == DYNAMIC_INDEX else d for d in shape)
    if meta(v)[1] == target:
        return v
    sizes: list[int | SSAValue] = [-1 if d is None else d for d in target]
    if target.count(None) > 1:
        sizes = [d if d is not None else
                 b.call("aten::sym_size.int", sizes_of, i, results=[i64])
                 for i, d in enumerate(target)]
    return b.call("aten::reshape.default", v, sizes, shape=target)


QUANT_PATTERNS = (RaiseQuant,)
