"""raise-native patterns for the forms vLLM spells its ops in: vLLM IR nodes
(`torch.ops.vllm_ir.*`), `_C` kernel calls (functionalized: `auto_functionalized` in
vLLM's post-grad graph, `auto_functionalized_v2` where AOTAutograd functionalizes a call
writing into a `torch.empty` buffer), vLLM's already fused `_C` kernels, and ROCm's
`torch.ops.vllm_aiter.*` norms.

A `_C` kernel means what vLLM's CUDA kernel computes; each form is raised onto the op (and
variant) that computes exactly that, or left alone:

| form | raised to | why / level |
|---|---|---|
| vllm_ir.rms_norm (any weight dtype, None, literal variance_size) | rms_norm | its native is the contract |
| vllm_ir.fused_add_rms_norm (+ .maybe_inplace, functionalized) | fused_add_rms_norm | f32 sum: the default variant |
| the same with variance_size | - | the op has no variance_size |
| vllm_ir.gelu_and_mul_sparse (literal std_multiplier) | gelu_and_mul_sparse | its native is the contract |
| _C.rms_norm (weight of x's dtype or None) | rms_norm | `(T)(x * rsqrtf(var + eps)) * w` in T |
| _C.fused_add_rms_norm | fused_add_rms_norm{rounded_sum} | the kernel adds in T and normalises that |
| _C.silu_and_mul, gelu_and_mul, gelu_tanh_and_mul | the act-and-mul op | activation rounded to T, product in T |
| _C.fatrelu_and_mul (literal threshold) | fatrelu_and_mul | `f > threshold ? f : 0`: a NaN gate gives 0, the native keeps it (OPS.md) |
| _C.static_scaled_fp8_quant (group_shape None) | static_scaled_fp8_quant | `x * (1 / scale)` |
| _C.dynamic_per_token_scaled_fp8_quant | dynamic_per_token_scaled_fp8_quant | `min(absmax, ub) / FMAX`, floored, `x / s` |
| _C.static_scaled_int8_quant (azp None; scale of one value, any shape) | static_scaled_int8_quant | CUDA: `rn(x / scale)`; vLLM's CPU build loaded: `{recip}`, `rn(x * (1 / scale))` (measured bit-exact) |
| _C.dynamic_scaled_int8_quant (azp None), vLLM's CPU build loaded | dynamic_per_token_scaled_int8_quant{recip} | `s = absmax / 127`, `rn(x * (1 / s))` (csrc/cpu, measured bit-exact: docs/OPS.md) |
| _C.dynamic_scaled_int8_quant (azp None), otherwise | dynamic_per_token_scaled_int8_quant | default level: CUDA's `x * (127 / absmax)` is `x / s` up to f32 ulps |
| _C.per_token_group_fp8_quant (row-major, no ue8m0, bounds +-FMAX) | per_token_group_fp8_quant | `max(absmax, eps) / FMAX`, `x / s` |
| _C.rms_norm_static_fp8_quant | rms_norm, static quant | the composition; fuse-norm-quant fuses it again |
| _C.fused_add_rms_norm_static_fp8_quant | fused_add_rms_norm{rounded_sum}, static quant | as above |
| _C.rms_norm_dynamic_per_token_quant (fp8; residual optional) | (fused_add_)rms_norm, per-token quant | the sum in f32: default variant |
| _C.rms_norm_per_block_quant (fp8, no ub, row-major) | (fused_add_)rms_norm, group quant `min_scale` | `max(absmax / FMAX, 1 / (FMAX * 512))` |
| _C.silu_and_mul_quant (fp8) | cast to f32, silu_and_mul, static quant | the product in f32, `x * (1 / scale)` |
| _C.silu_and_mul_per_block_quant (fp8, no ub, row-major) | cast to f32, silu_and_mul, group quant `min_scale` | the product in f32; scales as above |
| vllm_aiter.rms_norm, fused_add_rms_norm (gemma_norm False) | rms_norm, fused_add_rms_norm | default level: vLLM IR's impls, within its tolerances |

Left alone: vLLM's CPU build's `_C.rms_norm`, `fused_add_rms_norm` and act-and-mul kernels
(`CPU_OTHER_FUNCTION`): they round once from f32 (bf16 by truncation in `_C_AVX512`), not as
the CUDA kernels of the rows above (backends/vllm_c/kernels.py measured it),
`_C.dynamic_scaled_fp8_quant` (per tensor; its scale is not read here as the
contract's floor), int8 with a zero point (`azp`: the kernel rounds before adding it),
int8 out of the fused dynamic kernels (floored at FLT_EPSILON, the contract at 0), ue8m0
or transposed group scales, and an argument written through a slice or strided view of
its base (a view with its base's whole layout, `_x_alias`, is read as the base).

The fused kernels are raised as their compositions: fuse-norm-quant fuses them onto the
fused ops on meaning, with every other pair of the graph. `silu_and_mul_quant` and
`silu_and_mul_per_block_quant` keep the product in f32 where silu_and_mul's contract rounds
it to x's dtype: they are silu_and_mul of the input cast to f32 (nothing to round), then
the quant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from xdsl.dialects.builtin import (
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.dialects import vllm
from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.dialects.vllm_attrs import QuantVariantAttr
from vllm_xdsl.transforms.ir.routing import RoutedPattern
from vllm_xdsl.transforms.raising import match as m
from vllm_xdsl.transforms.raising import vllm_schemas as schemas
from vllm_xdsl.transforms.raising.build import build_norm, cast_op, epsilon_of, per_tensor_scale
from vllm_xdsl.transforms.raising.kernel_call import AUTO_V1, AUTO_V2, KernelCall, read_call

F32 = torch.float32
FMAX = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 224.0}


@dataclass
class Raised:
    ops: list[Operation]
    values: Mapping[SSAValue, SSAValue]
    """Result of the call -> the raised value holding it."""


class _Skip(Exception):
    """The form is not raised (the reason is in the module table)."""


def _tensor(v: object) -> SSAValue:
    if not isinstance(v, SSAValue) or not isinstance(v.type, TensorType):
        raise _Skip
    return v


def _norm(c: KernelCall, x: SSAValue, residual: SSAValue | None, weight: object,
          eps: object, out_type: Attribute, *, same_dtype: bool, rounded: bool = False,
          variance_size: object = None) -> Operation:
    w = None if weight is None else _tensor(weight)
    if w is not None and same_dtype and m.dtype(w) != m.dtype(x):
        raise _Skip  # the CUDA kernels read the weight in x's dtype
    e = epsilon_of(eps)
    if e is None:
        raise _Skip
    vs: Attribute | None = None
    if variance_size is not None:
        if residual is not None or not isinstance(variance_size, int):
            raise _Skip  # fused_add_rms_norm has no variance_size; a SymInt is no property
        vs = IntegerAttr(variance_size, i64)
    rounded = rounded and m.dtype(x) != F32  # in f32 the variants coincide
    return build_norm(x, residual, w, e, out_type, vs, rounded)


def _written(c: KernelCall, name: str) -> SSAValue:
    if name not in c.written:
        raise _Skip
    return c.written[name]


def _verified(op: Operation) -> Operation:
    try:
        op.verify()
    except VerifyException:
        raise _Skip from None
    return op


def _static_quant(x: SSAValue, scale: object, q_type: Attribute, int8: bool,
                  variant: str = "") -> list[Operation]:
    """The quant (last) and the reshape that makes a one-value scale the contract's [1]."""
    per_tensor = per_tensor_scale(_tensor(scale))
    if per_tensor is None:
        raise _Skip
    ops, s = per_tensor
    cls = vllm.StaticScaledInt8QuantOp if int8 else vllm.StaticScaledFp8QuantOp
    props = {"variant": QuantVariantAttr.from_variant(parse_variant(variant))} if variant else {}
    return [*ops, _verified(cls.build(operands=[x, s, []], result_types=[q_type],
                                      properties=props))]


def _per_token(x: SSAValue, ub: object, q_type: Attribute, s_type: Attribute,
               int8: bool = False, variant: str = "") -> Operation:
    if int8:
        props = {"variant": QuantVariantAttr.from_variant(parse_variant(variant))} if variant else {}
        return _verified(vllm.DynamicPerTokenScaledInt8QuantOp.build(
            operands=[x, []], result_types=[q_type, s_type], properties=props))
    ubs = [] if ub is None else [_tensor(ub)]
    return _verified(vllm.DynamicPerTokenScaledFp8QuantOp.build(
        operands=[x, ubs, []], result_types=[q_type, s_type]))


def _group(x: SSAValue, group_size: object, q_type: Attribute, s_type: Attribute,
           eps: float = DEFAULT_GROUP_EPS, variant: str = "") -> Operation:
    if not isinstance(group_size, int) or m.static_last_dim(x) is None:
        raise _Skip
    props: dict[str, Attribute] = {"group_size": IntegerAttr(group_size, i64)}
    if eps != DEFAULT_GROUP_EPS:
        props["eps"] = FloatAttr(eps, Float64Type())
    if variant:
        props["variant"] = QuantVariantAttr.from_variant(parse_variant(variant))
    return _verified(vllm.PerTokenGroupFp8QuantOp.build(
        operands=[x, []], result_types=[q_type, s_type], properties=props))


def _fp8(v: SSAValue) -> torch.dtype:
    d = m.dtype(v)
    if d not in FMAX:
        raise _Skip
    return d


# --- one builder per op: KernelCall -> Raised (or _Skip) --------------------------------


def _returned_norm(c: KernelCall, residual: str | None, epsilon: str,
                   variance_size: object = None) -> Raised:
    """A functional norm form (vLLM IR, aiter): `x`, `weight` and the named residual and
    epsilon arguments; its returned values are the norm's results, in order."""
    a = c.args
    n = _norm(c, _tensor(a["x"]), None if residual is None else _tensor(a[residual]),
              a["weight"], a[epsilon], c.returned[0].type, same_dtype=False,
              variance_size=variance_size)
    return Raised([n], dict(zip(c.returned, n.results, strict=False)))


def _ir_rms_norm(c: KernelCall) -> Raised:
    return _returned_norm(c, None, "epsilon", c.args["variance_size"])


def _ir_fused_add(c: KernelCall) -> Raised:
    if c.args["variance_size"] is not None:
        raise _Skip
    raised = _returned_norm(c, "x_residual", "epsilon")
    values = dict(raised.values)
    # maybe_inplace lets an impl overwrite x and x_residual; the native, vLLM IR's contract
    # (and what runs without a priority), leaves them as they were.
    for name in ("x", "x_residual"):
        if name in c.written:
            values[c.written[name]] = _tensor(c.args[name])
    return Raised(raised.ops, values)


def _ir_gelu_and_mul_sparse(c: KernelCall) -> Raised:
    a = c.args
    std, approximate = a["std_multiplier"], a["approximate"]
    if not m.is_number(std) or approximate not in ("none", "tanh"):
        raise _Skip  # a symbolic multiplier is no property; another GELU is no variant here
    props: dict[str, Attribute] = {"std_multiplier": FloatAttr(float(std), Float64Type())}
    if approximate != "none":
        props["approximate"] = StringAttr(approximate)
    new = _verified(vllm.GeluAndMulSparseOp.build(
        operands=[_tensor(a["x"]), []], result_types=[c.returned[0].type], properties=props))
    return Raised([new], {c.returned[0]: new.results[0]})


def _aiter_rms_norm(c: KernelCall) -> Raised:
    return _returned_norm(c, None, "variance_epsilon")


def _aiter_fused_add(c: KernelCall) -> Raised:
    if c.args["gemma_norm"] is not False:
        raise _Skip
    return _returned_norm(c, "residual", "variance_epsilon")


def _c_rms_norm(c: KernelCall) -> Raised:
    out = _written(c, "result")
    n = _norm(c, _tensor(c.args["input"]), None, c.args["weight"], c.args["epsilon"],
              out.type, same_dtype=True)
    return Raised([n], {out: n.results[0]})


def _c_fused_add(c: KernelCall) -> Raised:
    out, res = _written(c, "input"), _written(c, "residual")
    n = _norm(c, _tensor(c.args["input"]), _tensor(c.args["residual"]), c.args["weight"],
              c.args["epsilon"], out.type, same_dtype=True, rounded=True)
    return Raised([n], {out: n.results[0], res: n.results[1]})


def _c_act(cls: type[IRDLOperation], out_name: str,
           scalars: tuple[str, ...] = ()) -> Callable[[KernelCall], Raised]:
    """An act-and-mul kernel into `out_name`; `scalars`: its own float parameters, which must
    be literals (they become the op's properties)."""
    def build(c: KernelCall) -> Raised:
        out = _written(c, out_name)
        props: dict[str, Attribute] = {}
        for name in scalars:
            if not m.is_number(value := c.args[name]):
                raise _Skip  # known only at run time
            props[name] = FloatAttr(float(value), Float64Type())
        new = _verified(cls.build(operands=[_tensor(c.args["input"]), []], result_types=[out.type],
                                  properties=props))
        return Raised([new], {out: new.results[0]})
    return build


def _c_static(int8: bool) -> Callable[[KernelCall], Raised]:
    def build(c: KernelCall) -> Raised:
        out = _written(c, "result")
        if c.args.get("group_shape") is not None or c.args.get("azp") is not None:
            raise _Skip
        if int8 != (m.dtype(out) == torch.int8) or (not int8 and _fp8(out) is None):
            raise _Skip
        # csrc/cpu multiplies by the reciprocal of the scale, CUDA divides (measured)
        variant = "recip" if int8 and schemas.cpu_build() else ""
        new = _static_quant(_tensor(c.args["input"]), c.args["scale"], out.type, int8, variant)
        return Raised(new, {out: new[-1].results[0]})
    return build


def _c_per_token_fp8(c: KernelCall) -> Raised:
    out, scale = _written(c, "result"), _written(c, "scale")
    _fp8(out)
    new = _per_token(_tensor(c.args["input"]), c.args["scale_ub"], out.type, scale.type)
    return Raised([new], {out: new.results[0], scale: new.results[1]})


def _c_dynamic_int8(cpu: bool) -> Callable[[KernelCall], Raised]:
    """`cpu`: the CPU build's kernel, exactly `recip`; else CUDA's, the default level."""
    def build(c: KernelCall) -> Raised:
        out, scale = _written(c, "result"), _written(c, "scale")
        if cpu != schemas.cpu_build() or c.args["azp"] is not None or m.dtype(out) != torch.int8:
            raise _Skip
        new = _per_token(_tensor(c.args["input"]), None, out.type, scale.type, int8=True,
                         variant="recip" if cpu else "")
        return Raised([new], {out: new.results[0], scale: new.results[1]})
    return build


def _c_group_fp8(c: KernelCall) -> Raised:
    a = c.args
    q, s = _written(c, "output_q"), _written(c, "output_s")
    fmax = FMAX[_fp8(q)]
    if a["scale_ue8m0"] or a["dummy_is_scale_transposed"] or (a["fp8_min"], a["fp8_max"]) != (-fmax, fmax):
        raise _Skip
    if not m.is_number(a["eps"]):
        raise _Skip
    new = _group(_tensor(a["input"]), a["group_size"], q.type, s.type, float(a["eps"]))
    return Raised([new], {q: new.results[0], s: new.results[1]})


def _c_silu_and_mul_quant(group: bool) -> Callable[[KernelCall], Raised]:
    def build(c: KernelCall) -> Raised:
        a, x = c.args, _tensor(c.args["input"])
        dims, width = m.shape(x), m.static_last_dim(x)
        if dims is None or width is None or width % 2:
            raise _Skip
        cast = [] if m.dtype(x) == F32 else [cast_op(x, F32)]
        xf = cast[0].results[0] if cast else x
        act = _verified(vllm.SiluAndMulOp.build(operands=[xf, []], result_types=[
            TensorType(Float32Type(), (*dims[:-1], width // 2))]))
        if group:  # per-group scales as rms_norm_per_block_quant's: floored at min_scale
            q, s = _written(c, "out"), _written(c, "scales")
            _fp8(q)
            if a["scale_ub"] is not None or a["is_scale_transposed"] is not False:
                raise _Skip
            qop = _group(act.results[0], a["group_size"], q.type, s.type, variant="min_scale")
            return Raised([*cast, act, qop], {q: qop.results[0], s: qop.results[1]})
        out = _written(c, "result")
        _fp8(out)
        qops = _static_quant(act.results[0], a["scale"], out.type, int8=False)
        return Raised([*cast, act, *qops], {out: qops[-1].results[0]})
    return build


def _c_norm_static_fp8(residual: bool) -> Callable[[KernelCall], Raised]:
    def build(c: KernelCall) -> Raised:
        a, out = c.args, _written(c, "result")
        _fp8(out)
        x = _tensor(a["input"])
        r = _tensor(a["residual"]) if residual else None
        n = _norm(c, x, r, a["weight"], a["epsilon"], x.type, same_dtype=True, rounded=residual)
        qops = _static_quant(n.results[0], a["scale"], out.type, int8=False)
        values = {out: qops[-1].results[0]}
        if residual:
            values[_written(c, "residual")] = n.results[1]
        return Raised([n, *qops], values)
    return build


def _c_norm_dynamic(group: bool) -> Callable[[KernelCall], Raised]:
    def build(c: KernelCall) -> Raised:
        a, out, scale = c.args, _written(c, "result"), _written(c, "scale")
        _fp8(out)
        x = _tensor(a["input"])
        r = None if a["residual"] is None else _tensor(a["residual"])
        # These kernels add in f32 and normalise the unrounded sum: the default variant.
        n = _norm(c, x, r, a["weight"], a["epsilon"], x.type, same_dtype=True)
        if group:
            if a["scale_ub"] is not None or a["is_scale_transposed"] is not False:
                raise _Skip
            qop = _group(n.results[0], a["group_size"], out.type, scale.type, variant="min_scale")
        else:
            qop = _per_token(n.results[0], a["scale_ub"], out.type, scale.type)
        values = {out: qop.results[0], scale: qop.results[1]}
        if r is not None:
            values[_written(c, "residual")] = n.results[1]
        return Raised([n, qop], values)
    return build


BUILDERS: dict[str, Callable[[KernelCall], Raised]] = {
    "vllm_ir::rms_norm": _ir_rms_norm,
    "vllm_ir::fused_add_rms_norm": _ir_fused_add,
    "vllm_ir::fused_add_rms_norm.maybe_inplace": _ir_fused_add,
    "vllm_ir::gelu_and_mul_sparse": _ir_gelu_and_mul_sparse,
    "_C::rms_norm": _c_rms_norm,
    "_C::fused_add_rms_norm": _c_fused_add,
    "_C::silu_and_mul": _c_act(vllm.SiluAndMulOp, "result"),
    "_C::gelu_and_mul": _c_act(vllm.GeluAndMulOp, "out"),
    "_C::gelu_tanh_and_mul": _c_act(vllm.GeluTanhAndMulOp, "out"),
    "_C::fatrelu_and_mul": _c_act(vllm.FatreluAndMulOp, "out", ("threshold",)),
    "_C::static_scaled_fp8_quant": _c_static(int8=False),
    "_C::static_scaled_int8_quant": _c_static(int8=True),
    "_C::dynamic_per_token_scaled_fp8_quant": _c_per_token_fp8,
    "_C::per_token_group_fp8_quant": _c_group_fp8,
    "_C::rms_norm_static_fp8_quant": _c_norm_static_fp8(residual=False),
    "_C::fused_add_rms_norm_static_fp8_quant": _c_norm_static_fp8(residual=True),
    "_C::rms_norm_dynamic_per_token_quant": _c_norm_dynamic(group=False),
    "_C::rms_norm_per_block_quant": _c_norm_dynamic(group=True),
    "_C::silu_and_mul_quant": _c_silu_and_mul_quant(group=False),
    "_C::silu_and_mul_per_block_quant": _c_silu_and_mul_quant(group=True),
    "_C::dynamic_scaled_int8_quant": _c_dynamic_int8(cpu=True),
}
# Raised only at the default level (not bit-exact: module table).
DEFAULT_LEVEL: dict[str, Callable[[KernelCall], Raised]] = {
    "vllm_aiter::rms_norm": _aiter_rms_norm,
    "vllm_aiter::fused_add_rms_norm": _aiter_fused_add,
    "_C::dynamic_scaled_int8_quant": _c_dynamic_int8(cpu=False),
}


CPU_OTHER_FUNCTION = frozenset({"_C::rms_norm", "_C::fused_add_rms_norm", "_C::silu_and_mul",
                                "_C::gelu_and_mul", "_C::gelu_tanh_and_mul"})
"""Kernels whose CPU build computes another function than the builders describe (module doc)."""


@dataclass
class RaiseVllmCall(RoutedPattern):
    """A vLLM op call (module table) -> the semantic ops computing what it computes."""

    exact: bool = False  # BUILDERS only, not DEFAULT_LEVEL
    TARGETS = (AUTO_V1, AUTO_V2, "vllm_ir::rms_norm.default", "vllm_ir::fused_add_rms_norm.default",
               "vllm_ir::gelu_and_mul_sparse.default", "vllm_aiter::rms_norm.default",
               "vllm_aiter::fused_add_rms_norm.default")

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CallOp, rewriter: PatternRewriter) -> None:
        if op.target.data not in self.TARGETS or (c := read_call(op)) is None:
            return
        if c.name in CPU_OTHER_FUNCTION and schemas.cpu_build():
            return
        builders = [BUILDERS.get(c.name), None if self.exact else DEFAULT_LEVEL.get(c.name)]
        raised = None
        for build in filter(None, builders):
            try:
                raised = build(c)
                break
            except _Skip:
                continue
        if raised is None:
            return
        for r in op.results:
            if r not in raised.values and r.uses:
                return  # a result this form does not know the contents of is read
            if r in raised.values and r.type != raised.values[r].type:
                return
        rewriter.insert(raised.ops, InsertPoint.before(op))
        rewriter.replace(op, [], [raised.values.get(r) for r in op.results])


VLLM_PATTERNS = (RaiseVllmCall,)
