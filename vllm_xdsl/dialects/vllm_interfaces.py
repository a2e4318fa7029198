"""The typed interfaces of the `vllm` dialect's op families, and `define_op`.

What passes, the binding and the exporter ask of an op (`NormOp.epsilon_arg`,
`QuantOp.quant_scheme`, `ActAndMulOp.up`, ...) whatever dialect it is in (vllm, a provider,
auto). The families' operands, syntax and verifiers that implement them are in
vllm_families.py; the ops, generated from the catalog, in vllm.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from xdsl.dialects.builtin import Float64Type, FloatAttr, TensorType, UnitAttr
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.core.dtypes import DType
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.dialects.types import dtype_of
from vllm_xdsl.dialects.vllm_attrs import QuantSchemeAttr


class SemanticSignature(IRDLOperation):
    """Base of every op that carries a semantic op's operands (vllm and provider ops).

    IRDL reads `assembly_format`, `irdl_options` and `traits` through the class hierarchy,
    so each signature states its syntax once and every dialect's op of it inherits it.
    """

    # The name of the semantic op (OPS.md), shared by its vllm op and provider ops.
    SEMANTIC_NAME: ClassVar[str]

    # Every signature has an optional operand (weight, up, zero_point, ...): their segment
    # sizes are a property; properties print in the attribute dictionary.
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    traits = traits_def(Pure())

    # The typed interfaces below declare, for the type checker only, the fields that each
    # signature of the family defines with operand_def/result_def/prop_def (IRDL reads a
    # class's fields from its body, so they cannot be declared here at run time).
    if TYPE_CHECKING:
        x: SSAValue  # every semantic op's first operand: the activation

    def torch_extra_args(self) -> dict[str, Any]:
        """Arguments the exporter passes after the native's (auto.*: its bucket table)."""
        return {}


# --- typed interfaces of the op families ---------------------------------------------------


class NormOp(SemanticSignature):
    """The norm family (rms_norm, fused_add_rms_norm and their fused quant forms)."""

    if TYPE_CHECKING:
        weight: SSAValue | None
        epsilon_value: SSAValue | None  # a runtime epsilon (tensor<f64>), or None
        epsilon: FloatAttr[Float64Type] | None  # a compile-time epsilon, or None

    def epsilon_float(self) -> float | None:
        """Epsilon when it is a compile-time property, else None (runtime operand)."""
        return None if self.epsilon is None else self.epsilon.value.data

    def epsilon_arg(self) -> float | SSAValue:
        """Epsilon as the native gets it: the compile-time value, else the runtime operand."""
        eps = self.epsilon_float()
        if eps is not None:
            return eps
        assert self.epsilon_value is not None  # the verifier: exactly one of the two
        return self.epsilon_value


class ResidualNormOp(NormOp):
    """A norm of x + residual that also returns the sum (the fused_add_rms_norm forms)."""

    if TYPE_CHECKING:
        residual: SSAValue
        residual_out: OpResult[TensorType]
        # Unit property (docs/OPS.md "Variants"): the norm reads the sum rounded to x's
        # dtype (HF's add-then-norm, vLLM's CUDA kernel), i.e. residual_out; absent: the
        # unrounded f32 sum (vLLM's native).
        rounded_sum: UnitAttr | None


def has_rounded_sum(op: Operation) -> bool:
    """Whether `op` (a vllm or provider op) normalises the sum rounded to x's dtype."""
    return isinstance(op, ResidualNormOp) and op.rounded_sum is not None


class QuantOp(SemanticSignature):
    """The quant family: every op whose result `q` is quantized, described by a QuantScheme."""

    if TYPE_CHECKING:
        q: OpResult[TensorType]

    def quant_scheme(self) -> QuantScheme:
        """The scheme, its dtype a torch dtype (what the natives and kernels take)."""
        import torch  # only here: verifying reads the scheme with a DType (scheme_with)

        dtype: Any = getattr(torch, self._q_dtype().torch_name)
        return self.scheme_with(dtype)

    def scheme_with(self, dtype: Any) -> QuantScheme:
        """The scheme with `dtype` (a DType or a torch dtype) as the quant dtype."""
        raise NotImplementedError

    # The optional parts of a quant, by meaning (each form names its own fields).
    def static_scale(self) -> SSAValue | None:
        """The scale operand of a static scheme."""
        return None

    def scale_upper_bound(self) -> SSAValue | None:
        """The scale_ub operand (dynamic per-token fp8), if given."""
        return None

    def computed_scales(self) -> OpResult[TensorType] | None:
        """The scales result of a dynamic scheme."""
        return None

    def zero_point_operand(self) -> SSAValue | None:
        """The runtime zero point (docs/OPS.md "Variants"), if given."""
        return None

    def _q_dtype(self) -> DType:
        dtype = dtype_of(self.q.type.element_type)
        if dtype is None:
            raise VerifyException(f"q has element type {self.q.type.element_type}, not fp8 or int8")
        return dtype


class FusedQuantOp(QuantOp):
    """A producer fused with its quant: the scheme is an attribute, scale(s) optional."""

    if TYPE_CHECKING:
        scheme: QuantSchemeAttr
        scale: SSAValue | None  # the static scale
        scale_ub: SSAValue | None  # the upper bound of dynamic per-token scales
        scales: OpResult[TensorType] | None  # the computed scales (dynamic schemes)
        zero_point: SSAValue | None  # the runtime zero point (variants)


class ActAndMulOp(SemanticSignature):
    """The act-and-mul family: `act(gate) * up`, plain or fused with a quant."""

    ACTIVATION: ClassVar[str]  # the catalog spec's activation (ops/activations.py)

    if TYPE_CHECKING:
        up: SSAValue | None  # None: x holds the gate and up halves


_Sig = TypeVar("_Sig", bound=SemanticSignature)


def op_class_name(semantic: str) -> str:
    """The class of a semantic op in every dialect: rms_norm -> RmsNormOp (its signature:
    RmsNormSignature)."""
    return "".join(p.title() for p in semantic.split("_")) + "Op"


def define_op(
    dialect: str,
    signature: type[_Sig],
    extra: dict[str, object] | None = None,
    interfaces: tuple[type[SemanticSignature], ...] = (),
) -> type[_Sig]:
    """Declare `<dialect>.<semantic op>`: the signature's operands, results, syntax and
    verifier, for a dialect whose ops are derived from the signatures (providers, auto).

    `extra` adds class attributes, e.g. the implementation properties of a provider op;
    `interfaces` adds base classes after the signature (e.g. auto's AutoSelectionOp).
    """
    body: dict[str, object] = {
        "name": f"{dialect}.{signature.SEMANTIC_NAME}",
        "__module__": f"vllm_xdsl.dialects.{dialect}",
        **(extra or {}),
    }
    class_name = op_class_name(signature.SEMANTIC_NAME)
    return cast("type[_Sig]", irdl_op_definition(type(class_name, (signature, *interfaces), body)))
