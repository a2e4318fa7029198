"""The families of the `vllm` dialect's ops, written by hand: per family its operands,
results, syntax (assembly format) and verifier, and the bespoke signature of each norm and
quant op.

The ops themselves are derived: vllm.py is generated from the catalog
(vllm_xdsl/core/catalog.py) by `python -m vllm_xdsl.tools.gen_vllm_dialect`. It declares, per
semantic op, the act-and-mul family's member signatures (the activation and the member's own
scalar parameters as properties) and the `vllm.<op>` class. Each op's signature lives in a
`*Signature` class so that the provider dialects (`triton`, `cuda`, `rocm`) and `auto`
declare one op per kernel with exactly the same operands, results and verifier
(`vllm_interfaces.define_op`, beside the typed interfaces these families implement).

Ops say what is computed, never how. Operand order and names follow OPS.md; optional
operands are written with a keyword (`weight(...)`, `epsilon(...)`, `scale(...)`,
`scale_ub(...)`, `up(...)`), types next to them, so the syntax stays readable:

    %y = vllm.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64}
           : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
    %q, %s = vllm.rms_norm_quant %x weight(%w : tensor<4096xbf16>)
           {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<dynamic per_token>}
           : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x1xf32>
    %a = vllm.gelu_tanh_and_mul %gate up(%up : tensor<?x8192xbf16>)
           : tensor<?x8192xbf16> -> tensor<?x8192xbf16>
    %y, %r = vllm.fused_add_rms_norm %x, %res {epsilon = 1.0e-06 : f64, rounded_sum}
           : tensor<?x64xbf16>, tensor<?x64xbf16> -> tensor<?x64xbf16>, tensor<?x64xbf16>

Epsilon is an `f64` property when known at compile time, or a runtime scalar operand
(`epsilon(%e : tensor<f64>)`) when the graph passes it in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from xdsl.dialects.builtin import (
    I64,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    UnitAttr,
)
from xdsl.ir import OpResult, SSAValue
from xdsl.irdl import (
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
)
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.core import catalog
from vllm_xdsl.core.dtypes import DType
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.core.variant import DEFAULT_VARIANT, QuantVariant
from vllm_xdsl.dialects import vllm_checks as check
from vllm_xdsl.dialects.vllm_attrs import (
    QuantGranularityAttr,
    QuantModeAttr,
    QuantSchemeAttr,
    QuantVariantAttr,
    RoundingDTypeAttr,
    VariantFloorAttr,
    VariantScalingAttr,
    scheme_problem,
)
from vllm_xdsl.dialects.vllm_interfaces import (
    ActAndMulOp,
    FusedQuantOp,
    NormOp,
    QuantOp,
    ResidualNormOp,
)

# Assembly-format pieces for keyword-introduced optional operands.
_WEIGHT = "(`weight` `(` $weight^ `:` type($weight) `)`)?"
_EPS = "(`epsilon` `(` $epsilon_value^ `:` type($epsilon_value) `)`)?"
_SCALE = "(`scale` `(` $scale^ `:` type($scale) `)`)?"
_SCALE_UB = "(`scale_ub` `(` $scale_ub^ `:` type($scale_ub) `)`)?"
_SCALES = "(`,` type($scales)^)?"
_UP = "(`up` `(` $up^ `:` type($up) `)`)?"
_ZP = "(`zero_point` `(` $zero_point^ `:` type($zero_point) `)`)?"


class _NormMixin(NormOp):
    """Checks shared by the norm ops: x, residual, weight, epsilon."""

    def _verify_norm(self) -> TensorType:
        x = check.activation(self.x)
        if isinstance(self, ResidualNormOp):
            check.same_shape(self.residual, x, "residual", None)
            check.activation(self.residual, "residual")
        check.weight(self.weight, x)
        check.epsilon(self.epsilon, self.epsilon_value)
        if "rounded_sum" in self.attributes and not isinstance(self, ResidualNormOp):
            raise VerifyException(
                "rounded_sum applies to the fused add ops (there is no sum to round here)"
            )
        return x


class _UnfusedQuantSignature(QuantOp):
    """The unfused quant family: the op's name fixes its quant form (catalog `QuantForm`:
    fp8 or int8, static or dynamic, the granularity); the rest of its scheme is its
    properties, plus an optional `variant` property (default: the OPS.md row) and an
    optional runtime `zero_point` operand. Each member (generated into vllm.py from the
    catalog) declares its own operands, properties and syntax; the checks are these."""

    variant = opt_prop_def(QuantVariantAttr)
    zero_point = opt_operand_def(TensorType)
    if TYPE_CHECKING:  # the members' own fields, where their form has them
        x: SSAValue
        scale: SSAValue
        group_size: IntegerAttr

    @classmethod
    def form(cls) -> catalog.QuantForm:
        form = catalog.SPECS[cls.SEMANTIC_NAME].form
        assert form is not None  # the catalog checks that a quant op has one
        return form

    def quant_variant(self) -> QuantVariant:
        return DEFAULT_VARIANT if self.variant is None else self.variant.to_variant()

    def zero_point_operand(self) -> SSAValue | None:
        return self.zero_point

    def static_scale(self) -> SSAValue | None:
        return self.scale if self.form().static else None

    def scale_upper_bound(self) -> SSAValue | None:
        return getattr(self, "scale_ub", None)

    def computed_scales(self) -> OpResult[TensorType] | None:
        return None if self.form().static else cast(OpResult[TensorType], self.results[1])

    def scheme_with(self, dtype: Any) -> QuantScheme:
        fields: dict[str, Any] = {}
        for p in catalog.SPECS[self.SEMANTIC_NAME].params:
            attr = self.properties.get(p.name)
            if p.name in catalog.FORM_FIELDS and isinstance(attr, IntegerAttr | FloatAttr):
                value = attr.value.data
                fields[catalog.FORM_FIELDS[p.name]] = bool(value) if p.kind == "bool" else value
        form = self.form()
        return QuantScheme(dtype, form.static, form.granularity, variant=self.quant_variant(),
                           **fields)

    def verify_(self) -> None:
        form = self.form()
        x = check.activation(self.x)
        if form.static:
            check.static_scale(self.scale)
        scale_ub = self.scale_upper_bound()
        if scale_ub is not None:
            check.static_scale(scale_ub, "scale_ub")
        if form.granularity == "group":
            check.group_size(x, self.group_size.value.data)
        check.quant_result(self.q, x, form.dtype)
        scheme = self._verify_variant(x)
        scales = self.computed_scales()
        if scales is not None:
            check.scales_result(scales, x, scheme)

    def _verify_variant(self, x: TensorType) -> QuantScheme:
        """The scheme, or a VerifyException naming the variant that does not fit the op."""
        try:
            scheme = self.scheme_with(self._q_dtype())
        except ValueError as e:
            raise VerifyException(
                f"variant {self.variant} does not fit {self.SEMANTIC_NAME}: "
                f"{scheme_problem(e)}"
            ) from None
        check.zero_point(self.zero_point, x, scheme)
        return scheme


# --- unfused norm ops --------------------------------------------------------------------


class RmsNormSignature(_NormMixin):
    SEMANTIC_NAME: ClassVar[str] = "rms_norm"
    assembly_format = f"$x {_WEIGHT} {_EPS} attr-dict `:` type($x) `->` type($out)"
    x = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    epsilon_value = opt_operand_def()
    epsilon = opt_prop_def(FloatAttr[Float64Type])
    variance_size = opt_prop_def(IntegerAttr[I64])
    out = result_def(TensorType)

    def verify_(self) -> None:
        x = self._verify_norm()
        check.same_shape(self.out, x, "out", x.element_type)
        if self.variance_size is not None:
            size, hidden = self.variance_size.value.data, check.hidden_size(x)
            if size <= 0 or (hidden >= 0 and size > hidden):
                raise VerifyException(
                    f"variance_size {size} must be in 1..{hidden} (the hidden size)"
                )


class FusedAddRmsNormSignature(_NormMixin, ResidualNormOp):
    SEMANTIC_NAME: ClassVar[str] = "fused_add_rms_norm"
    assembly_format = (
        f"$x `,` $residual {_WEIGHT} {_EPS} attr-dict `:` type($x) `,` type($residual) "
        "`->` type($out) `,` type($residual_out)"
    )
    x = operand_def(TensorType)
    residual = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    epsilon_value = opt_operand_def()
    epsilon = opt_prop_def(FloatAttr[Float64Type])
    rounded_sum = opt_prop_def(UnitAttr)  # the variant (ResidualNormOp)
    out = result_def(TensorType)
    residual_out = result_def(TensorType)

    def verify_(self) -> None:
        x = self._verify_norm()
        check.same_shape(self.out, x, "out", x.element_type)
        check.same_shape(self.residual_out, x, "residual_out", x.element_type)


# --- fused ops ---------------------------------------------------------------------------


class _FusedQuantMixin(FusedQuantOp):
    """A fused op's scheme is its `scheme` attribute plus its `q` element type."""

    def scheme_with(self, dtype: Any) -> QuantScheme:
        return self.scheme.to_scheme(dtype)

    def static_scale(self) -> SSAValue | None:
        return self.scale

    def scale_upper_bound(self) -> SSAValue | None:
        return self.scale_ub

    def computed_scales(self) -> OpResult[TensorType] | None:
        return self.scales

    def zero_point_operand(self) -> SSAValue | None:
        return self.zero_point

    def _verify_scheme(self, x: TensorType, q_shape_of: TensorType) -> None:
        dtype = check.quant_result(self.q, q_shape_of, "fp8 or int8")
        self._verify_zero_point(q_shape_of, dtype)
        try:
            scheme = self.scheme.to_scheme(dtype)
        except ValueError as e:
            raise VerifyException(
                f"scheme {self.scheme} does not fit result element type "
                f"{self.q.type.element_type}: "
                f"{scheme_problem(e)}"
            ) from None
        if scheme.static:
            if self.scale is None:
                raise VerifyException("a static scheme needs a scale(...) operand")
            check.static_scale(self.scale)
            if self.scales is not None:
                raise VerifyException(
                    "a static scheme has no scales result (the scale is an input)"
                )
        else:
            if self.scale is not None:
                raise VerifyException("a dynamic scheme computes its scales: remove scale(...)")
            if self.scales is None:
                raise VerifyException("a dynamic scheme needs a scales result")
            if scheme.granularity == "tensor":
                raise VerifyException(
                    "dynamic per-tensor quantization cannot be fused (it needs a global reduction)"
                )
            check.scales_result(self.scales, q_shape_of, scheme)
        if self.scale_ub is not None:
            if scheme.static or scheme.granularity != "token" or not scheme.is_fp8:
                raise VerifyException("scale_ub applies to dynamic per-token fp8 only")
            check.static_scale(self.scale_ub, "scale_ub")

    def _verify_zero_point(self, q_shape_of: TensorType, dtype: DType) -> None:
        zp = self.zero_point
        if zp is not None:
            try:
                scheme = self.scheme.to_scheme(dtype)
            except ValueError:
                return  # reported by _verify_scheme
            check.zero_point(zp, q_shape_of, scheme)


class _NormQuantFields(_FusedQuantMixin, _NormMixin):
    """The operands and properties a fused norm+quant op has after its inputs. xDSL collects
    an op's fields from its class first, then from its bases: a member declares its inputs
    (x, the residual) and its results, and its operands are those inputs, then these."""

    weight = opt_operand_def(TensorType)
    scale = opt_operand_def(TensorType)
    scale_ub = opt_operand_def(TensorType)
    zero_point = opt_operand_def(TensorType)
    epsilon_value = opt_operand_def()
    epsilon = opt_prop_def(FloatAttr[Float64Type])
    scheme = prop_def(QuantSchemeAttr)


class RmsNormQuantSignature(_NormQuantFields):
    SEMANTIC_NAME: ClassVar[str] = "rms_norm_quant"
    assembly_format = (
        f"$x {_WEIGHT} {_SCALE} {_SCALE_UB} {_ZP} {_EPS} attr-dict `:` type($x) "
        f"`->` type($q) {_SCALES}"
    )
    x = operand_def(TensorType)
    q = result_def(TensorType)
    scales = opt_result_def(TensorType)

    def verify_(self) -> None:
        x = self._verify_norm()
        self._verify_scheme(x, x)


class FusedAddRmsNormQuantSignature(_NormQuantFields, ResidualNormOp):
    SEMANTIC_NAME: ClassVar[str] = "fused_add_rms_norm_quant"
    assembly_format = (
        f"$x `,` $residual {_WEIGHT} {_SCALE} {_SCALE_UB} {_ZP} {_EPS} attr-dict `:` type($x) "
        f"`,` type($residual) `->` type($q) `,` type($residual_out) {_SCALES}"
    )
    x = operand_def(TensorType)
    residual = operand_def(TensorType)
    rounded_sum = opt_prop_def(UnitAttr)  # the variant (ResidualNormOp)
    q = result_def(TensorType)
    residual_out = result_def(TensorType)
    scales = opt_result_def(TensorType)

    def verify_(self) -> None:
        x = self._verify_norm()
        check.same_shape(self.residual_out, x, "residual_out", x.element_type)
        self._verify_scheme(x, x)


# --- the activation-and-mul family -------------------------------------------------------
#
# One signature family, parameterised by the activation (ops/activations.py): `act(gate) *
# up` on x[..., 2d] (gate and up halves) or, with `up(%u : ...)`, on x = gate[..., d] and
# up[..., d]. Its members (an unfused op per activation, most with a fused quant op) are
# generated into vllm.py from the catalog: they name the op and the activation and declare
# the member's own scalar parameters as properties, so every check below holds for all.


class _ActAndMulMixin(ActAndMulOp):
    def _verify_act(self, result: SSAValue, what: str) -> TensorType:
        """Checks x and up; returns the shape the result has (element type of x)."""
        x = check.activation(self.x)
        up = self.up
        if up is not None:
            check.same_shape(up, x, "up", x.element_type)
            check.same_shape(result, x, what, None)
            return x
        h = check.hidden_size(x)
        if h >= 0 and h % 2:
            raise VerifyException(
                f"x needs an even last dimension (gate and up halves), got {h};"
                " or pass the up projection as up(...)"
            )
        t = check.tensor_of(result, what)
        half = TensorType(x.element_type, (*x.get_shape()[:-1], h // 2 if h >= 0 else h))
        if not check.shapes_agree(t.get_shape(), half.get_shape()):
            raise VerifyException(
                f"{what} must have the shape of x with the last dimension halved, got {t}"
            )
        return half


class _ActAndMulSignature(_ActAndMulMixin):
    assembly_format = f"$x {_UP} attr-dict `:` type($x) `->` type($out)"
    x = operand_def(TensorType)
    up = opt_operand_def(TensorType)
    out = result_def(TensorType)

    def verify_(self) -> None:
        shape = self._verify_act(self.out, "out")
        check.same_shape(self.out, shape, "out", shape.element_type)
        # A member's own str parameters (catalog) are properties: their values are checked.
        for p in catalog.SPECS[self.SEMANTIC_NAME].params:
            value = self.properties.get(p.name)
            if p.choices and isinstance(value, StringAttr) and value.data not in p.choices:
                allowed = " or ".join(f'"{c}"' for c in p.choices)
                raise VerifyException(f"{p.name} must be {allowed}, got {value.data!r}")


class _ActAndMulQuantSignature(_FusedQuantMixin, _ActAndMulMixin):
    assembly_format = (
        f"$x {_UP} {_SCALE} {_SCALE_UB} {_ZP} attr-dict `:` type($x) `->` type($q) {_SCALES}"
    )
    x = operand_def(TensorType)
    up = opt_operand_def(TensorType)
    scale = opt_operand_def(TensorType)
    scale_ub = opt_operand_def(TensorType)
    zero_point = opt_operand_def(TensorType)
    scheme = prop_def(QuantSchemeAttr)
    q = result_def(TensorType)
    scales = opt_result_def(TensorType)

    def verify_(self) -> None:
        shape = self._verify_act(self.q, "q")
        self._verify_scheme(check.activation(self.x), shape)


# The dialect's attributes (vllm_attrs.py), registered with its ops.
ATTRIBUTES = (
    QuantSchemeAttr, QuantVariantAttr, QuantModeAttr, QuantGranularityAttr, VariantScalingAttr,
    VariantFloorAttr, RoundingDTypeAttr,
)
