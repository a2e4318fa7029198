"""`fuse-norm-quant`: fuse a norm (or an act-and-mul) with the quantization of its output.

Works on the `vllm` dialect, in every function of the module. Rewrites on meaning: the
quant op's `quant_scheme()` becomes the fused op's `scheme`, epsilon is carried over as
the property or the runtime operand it was, so one rewrite covers every epsilon, dtype,
group size and backend.

Rewrites:
- `rms_norm` -> quant  =>  `rms_norm_quant`;
- `fused_add_rms_norm` -> quant  =>  `fused_add_rms_norm_quant` (`residual_out` kept);
- `silu_and_mul` / `gelu_and_mul` / `gelu_tanh_and_mul` (one operand, or gate and `up`)
  -> quant  =>  `<act>_and_mul_quant` with the same operands;
- `torch.call "aten::add.Tensor"(a, b)` (alpha 1, no broadcast) -> `rms_norm`  =>
  `fused_add_rms_norm(a, b)`, other users of the sum use `residual_out` (an f16/bf16 add
  as the `rounded_sum` variant: see "rounding" below; raise-native's pattern,
  raising/residual_add.py); then the rules above apply.
The quants are static fp8, dynamic per-token fp8 (with `scale_ub`), per-token-group fp8
(any group size, ue8m0, column-major), static int8 and dynamic per-token int8, for every
producer (vLLM fuses SiLU-and-mul with static and group fp8 only; the fused contract and
every provider here cover all of these). Dynamic per-tensor fp8 is never fused: it needs a
global reduction before any row is quantized.

Decisions:
- **Residual add raising and rounding.** Add-then-norm normalises the sum rounded to the
  activation dtype; `fused_add_rms_norm` normalises the unrounded f32 sum unless it carries
  `rounded_sum` (OPS.md "Variants"). For f32 adds the two are bit-identical (the default
  spelling is used); an f16/bf16 add becomes the `rounded_sum` variant, which computes
  exactly what the graph computes. Raising it onto the f32-sum variant instead would
  change the norm by an ulp, which a quant after it turns into fp8 flips (measured,
  257x4096 per-token fp8: 0.34 % of values for f16, 2.8 % for bf16) and a model of fp8
  linears amplifies beyond the whole-model tolerance: this pass never does that. The
  variant travels into `fused_add_rms_norm_quant`. `residual_out` is bit-identical to the add in every case.
- **Views.** aten view/reshape/_unsafe_view/flatten/unflatten/squeeze/unsqueeze calls
  between producer and quant that keep the element type and the (static) last dimension
  do not block fusion: the fused op runs on the producer's
  shape and the views are re-applied to `q`. Scales need no view: per-token and per-group
  scales are `[T, 1]` / `[T, G]` with `T` the product of the leading dims, and a view that
  keeps the last dim keeps both `T` and the row order. A view changing the last dimension
  blocks fusion.
- **Fan-out.** We fuse only when every user of the producer's output (through such views)
  is a fusable quant: then each quant gets its own fused op and the unfused producer
  disappears. With any other user (a non-quant op, an unfusable quant, a last-dim-changing
  view) nothing is fused: keeping an unfused copy would cost the same memory traffic and
  kernel count as not fusing (x read twice instead of y once), plus a recomputed norm.
- **Guards.** A set `variance_size` blocks fusion: the fused ops have none, so they cannot
  express it. A weight whose dtype differs from the activation (Gemma's f32 `1 + w` on bf16
  x) does not: the fused op's contract is the composition, `y.to(weight.dtype) * weight`
  then `.to(x.dtype)` and the quant of that, for any weight dtype (a provider that lacks a
  weight dtype rejects it in supports_args and dispatch picks another).
- Leftovers (quants, views, producers, adds) are erased when dead; torch calls only when
  their effects allow (the `dialects.torch.TorchCallEffects` trait).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cmp_to_key
from typing import TypeGuard, cast

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType, UnitAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
)

from vllm_xdsl.core import catalog
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.dialects import vllm
from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.dialects.vllm_attrs import QuantSchemeAttr
from vllm_xdsl.ops import FUSED
from vllm_xdsl.transforms.fusing.views import is_row_view, reapply_view
from vllm_xdsl.transforms.ir.build import build_op
from vllm_xdsl.transforms.ir.placement import (
    all_before,
    dominates,
    erase_dead,
    insert_before,
    is_before,
)
from vllm_xdsl.transforms.ir.routing import RoutedPattern, RoutedPatterns
from vllm_xdsl.transforms.raising.residual_add import RaiseResidualAdd


def _fusable_scheme(s: QuantScheme) -> bool:
    return s.static or s.granularity != "tensor"  # dynamic per-tensor needs a global max


@dataclass(frozen=True)
class Family:
    """A producer op, the fused op it forms with a quant, and the schemes it can absorb."""

    fused: type[vllm.FusedQuantOp]
    accepts: Callable[[QuantScheme], bool]


# Each fused op of the catalog with the producer it composes (norms and every act-and-mul
# op, one operand or gate and up).
FAMILIES: dict[type[Operation], Family] = {
    vllm.OPS_BY_NAME[spec.producer]: Family(
        cast("type[vllm.FusedQuantOp]", vllm.OPS_BY_NAME[spec.name]), _fusable_scheme
    )
    for spec in catalog.FUSED_SPECS
    if spec.producer is not None
}


def _unfused_quant(op: Operation) -> TypeGuard[vllm.QuantOp]:
    return (
        isinstance(op, vllm.QuantOp)
        and op.name.startswith("vllm.")
        and op.SEMANTIC_NAME not in FUSED
    )


@dataclass
class _Consumers:
    """The users of a producer's output, seen through row-preserving views."""

    quants: list[tuple[vllm.QuantOp, list[CallOp]]] = field(default_factory=list)
    views: list[CallOp] = field(default_factory=list)
    blocked: bool = False

    def collect(self, value: SSAValue, path: list[CallOp], family: Family) -> None:
        block = value.owner.parent if isinstance(value.owner, Operation) else None
        for use in list(value.uses):
            user = use.operation
            if user.parent is not block:
                self.blocked = True
            elif use.index == 0 and is_row_view(user):
                assert isinstance(user, CallOp)
                self.views.append(user)
                self.collect(user.outputs[0], [*path, user], family)
            elif (use.index == 0 and _unfused_quant(user) and family.accepts(user.quant_scheme())
                  and _zero_point_fits(user, path)):
                self.quants.append((user, path))
            else:
                self.blocked = True


def _zero_point_fits(quant: vllm.QuantOp, path: list[CallOp]) -> bool:
    """A per-token zero point is shaped like the quant's rows: only without a view between."""
    zp = quant.zero_point_operand()
    if zp is None or not path:
        return True
    shape = zp.type.get_shape() if isinstance(zp.type, TensorType) else None
    return shape in ((), (1,))


def _program_order(a: tuple[Operation, list[CallOp]], b: tuple[Operation, list[CallOp]]) -> int:
    return -1 if is_before(a[0], b[0]) else 1


def _guarded(producer: Operation) -> bool:
    """OPS.md fusion guards: variance_size (the fused ops cannot express it)."""
    return isinstance(producer, vllm.RmsNormSignature) and producer.variance_size is not None


class FuseQuantIntoProducer(RoutedPattern):
    """Producer (norm / act-and-mul) -> views -> quant(s)  =>  one fused op per quant."""

    OP_TYPES = tuple(FAMILIES)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        family = FAMILIES.get(type(op))
        if family is None or _guarded(op):
            return
        assert isinstance(op, vllm.SemanticSignature)
        consumers = _Consumers()
        consumers.collect(op.results[0], [], family)
        if consumers.blocked or not consumers.quants:
            return
        # Program order, so that the earliest quant's fused op takes over residual_out.
        consumers.quants.sort(key=cmp_to_key(_program_order))
        residual_out = op.residual_out if isinstance(op, vllm.ResidualNormOp) else None
        anchors: list[Operation] = [quant for quant, _ in consumers.quants]
        if residual_out is not None and residual_out.uses:
            # The first fused op takes over residual_out: it must come before its users.
            first = self._residual_anchor(op, consumers.quants[0][0], residual_out)
            if first is None:
                return
            anchors[0] = first
        for i, ((quant, path), anchor) in enumerate(zip(consumers.quants, anchors, strict=True)):
            fused = self._fused_op(op, quant, family)
            insert_before(rewriter, fused, anchor)
            q: SSAValue = fused.q
            for view in path:
                new_view = reapply_view(view, q)
                insert_before(rewriter, new_view, quant)
                q = new_view.outputs[0]
            scales = quant.computed_scales()
            rewriter.replace_all_uses_with(quant.q, q)
            if scales is not None:
                assert fused.scales is not None  # built with a scales result (_fused_op)
                rewriter.replace_all_uses_with(scales, fused.scales)
            if i == 0 and residual_out is not None:
                assert isinstance(fused, vllm.ResidualNormOp)  # the fused_add family
                rewriter.replace_all_uses_with(residual_out, fused.residual_out)
            rewriter.erase(quant)
        for view in reversed(consumers.views):
            erase_dead(view, rewriter)
        erase_dead(op, rewriter)

    @staticmethod
    def _residual_anchor(
        producer: Operation, quant: vllm.QuantOp, residual_out: SSAValue
    ) -> Operation | None:
        """Where the fused op that replaces residual_out may go: at the producer if the
        quant's scale operands are already defined there, else at the quant if every user
        of residual_out comes after it; None if neither."""
        extras = [v for v in (quant.static_scale(), quant.scale_upper_bound(),
                              quant.zero_point_operand()) if v is not None]
        if all(dominates(v, producer) for v in extras):
            return producer
        if all_before(quant, [u.operation for u in residual_out.uses]):
            return quant
        return None

    @staticmethod
    def _fused_op(
        producer: vllm.SemanticSignature, quant: vllm.QuantOp, family: Family
    ) -> vllm.FusedQuantOp:
        scheme = quant.quant_scheme()
        x = producer.operands[0].type
        out = producer.results[0].type
        assert isinstance(x, TensorType) and isinstance(out, TensorType)
        q_type = TensorType(quant.q.type.element_type, out.get_shape())
        norm = producer if isinstance(producer, vllm.NormOp) else None
        fused_add = producer if isinstance(producer, vllm.ResidualNormOp) else None
        operands: dict[str, SSAValue | None] = {
            "x": producer.x,
            "residual": None if fused_add is None else fused_add.residual,
            "weight": None if norm is None else norm.weight,
            "epsilon_value": None if norm is None else norm.epsilon_value,
            "up": producer.up if isinstance(producer, vllm.ActAndMulOp) else None,
        }
        operands["scale"] = quant.static_scale() if scheme.static else None
        operands["scale_ub"] = quant.scale_upper_bound()
        operands["zero_point"] = quant.zero_point_operand()
        scales = quant.computed_scales()
        residual_out = None if fused_add is None else fused_add.residual_out
        result_types = {
            "q": q_type,
            "residual_out": None if residual_out is None else residual_out.type,
            "scales": None if scales is None else scales.type,
        }
        epsilon = None if norm is None else norm.epsilon
        props: dict[str, Attribute] = {} if epsilon is None else {"epsilon": epsilon}
        if vllm.has_rounded_sum(producer):
            props["rounded_sum"] = UnitAttr()
        props["scheme"] = QuantSchemeAttr.from_scheme(scheme)
        return build_op(family.fused, operands, result_types, props)


@dataclass(frozen=True)
class FuseNormQuantPass(ModulePass):
    """Fuse rms_norm / fused_add_rms_norm / the act-and-mul ops with the quant of their output."""

    name = "fuse-norm-quant"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            RoutedPatterns([RaiseResidualAdd(), FuseQuantIntoProducer()]),  # each on its op types
            apply_recursively=True,
        ).rewrite_module(op)
