"""The catalog: one `OpSpec` per semantic op, the declaration everything else derives from.

A spec says what docs/OPS.md says about an op, as data: its parameters in the native
function's order (tensors and scalars, which may be None, which have a default), its
results (which may be absent), the in-place map, whether it is fused, what a fused op
composes, the activation of an act-and-mul op, and where its native function lives (a
"module:function" reference: the natives need torch, the catalog does not).

`vllm_xdsl.ops` builds one `SemanticOp` per spec; test_core_catalog.py checks every spec
against its native's signature, so the two cannot drift.

Adding an op: a spec here (in UNFUSED_SPECS or FUSED_SPECS), its native function, and the
kernel pieces its family does not derive (docs/ADDING_AN_OP.md says which files).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vllm_xdsl.core.dtypes import DType
from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS, Granularity

Family = Literal["norm", "residual_norm", "quant", "act_and_mul", "sparse_act_and_mul"]
# The pieces an op has beside its native (test_core_pieces.py checks each, or the op's
# opt-out): a Triton kernel (a template family), a raise form (raise-native turns a torch
# decomposition into the op), a vLLM mapping (raise_vllm turns a vLLM op into it).
Piece = Literal["triton", "raise", "vllm"]
PIECES: tuple[Piece, ...] = ("triton", "raise", "vllm")
Kind = Literal["tensor", "float", "int", "bool", "str", "dtype"]
Scalar = float | int | bool | str | DType | None


class _Required:
    """The default of a parameter that has none."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class Param:
    """One parameter of the native: `optional` means it may be None (an absent operand);
    `choices`, the values a "str" parameter may take (the dialect's verifier checks them)."""

    name: str
    kind: Kind
    optional: bool = False
    default: Scalar | _Required = REQUIRED
    choices: tuple[str, ...] = ()

    @property
    def has_default(self) -> bool:
        return self.default is not REQUIRED

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"


@dataclass(frozen=True)
class Result:
    """One result; `optional`: absent in the IR for some arguments (static scales)."""

    name: str
    optional: bool = False


@dataclass(frozen=True)
class QuantForm:
    """What an unfused quant op's name fixes of its scheme: the quantized type ("fp8": any
    fp8 type, the op's `fp8_dtype` parameter picks it), static or dynamic, the granularity.
    The op's other scheme fields are its parameters of the same names (`eps` is group_eps)."""

    dtype: Literal["fp8", "int8"]
    static: bool
    granularity: Granularity


# An unfused quant's parameters that are QuantScheme fields: parameter -> field.
FORM_FIELDS: dict[str, str] = {"group_size": "group_size",
                               "column_major_scales": "column_major_scales",
                               "use_ue8m0": "use_ue8m0", "eps": "group_eps"}


@dataclass(frozen=True)
class OpSpec:
    name: str
    family: Family
    params: tuple[Param, ...]
    results: tuple[Result, ...]
    native: str  # "module:function"
    # Which result an in-place kernel may write into which tensor parameter.
    inplace: tuple[tuple[str, str], ...] = ()
    fused: bool = False
    # A fused op: the unfused producer and the unfused quants whose composition it is.
    producer: str | None = None
    quants: tuple[str, ...] = ()
    activation: str | None = None  # act-and-mul ops: "silu", "gelu", "gelu_tanh", "fatrelu"
    form: QuantForm | None = None  # unfused quant ops: the scheme their name fixes
    # The pieces (PIECES) the op has none of, each with the reason.
    opts_out: tuple[tuple[Piece, str], ...] = ()

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def result_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.results)

    @property
    def own_scalars(self) -> tuple[Param, ...]:
        """An act-and-mul member's own scalar parameters (gelu_and_mul_sparse's
        std_multiplier): those its family does not carry (x, up, a fused op's scheme). Its
        vllm op has them as properties, its kernels take them as arguments."""
        if self.activation is None:
            return ()
        family = {"x", "up", *(p.name for p in SCHEME_PARAMS)}
        return tuple(p for p in self.params if p.name not in family)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")

    def problem(self) -> str | None:
        """Why this spec is inconsistent, or None."""
        names = self.param_names
        if len(set(names)) != len(names) or len(set(self.result_names)) != len(self.results):
            return "duplicate parameter or result names"
        seen_default = False
        for p in self.params:
            if p.has_default:
                seen_default = True
            elif seen_default:
                return f"parameter {p.name!r} without a default follows one with a default"
        for p in self.params:
            if p.choices and (p.kind != "str" or (p.has_default and p.default not in p.choices)):
                return f"parameter {p.name!r}: choices need a str parameter and hold its default"
        for out, inp in self.inplace:
            if out not in self.result_names or inp not in names or not self.param(inp).is_tensor:
                return f"in-place entry {out!r} -> {inp!r} names no result and tensor parameter"
        if self.fused != (self.producer is not None) or self.fused != bool(self.quants):
            return "a fused op (and only one) names its producer and quants"
        if (self.family in ("act_and_mul", "sparse_act_and_mul")) != (self.activation is not None):
            return "an act-and-mul op (and only one) names its activation"
        if (self.family == "quant") != (self.form is not None):
            return "an unfused quant op (and only one) names its quant form"
        if any(piece not in PIECES for piece, _ in self.opts_out):
            return f"opts out of an unknown piece (pieces: {', '.join(PIECES)})"
        if ":" not in self.native:
            return f"native {self.native!r} is not a 'module:function' reference"
        return None


def _t(name: str) -> Param:
    return Param(name, "tensor")


def _opt_t(name: str, default: Scalar | _Required = REQUIRED) -> Param:
    return Param(name, "tensor", optional=True, default=default)


def _opt_int(name: str, default: Scalar | _Required = REQUIRED) -> Param:
    return Param(name, "int", optional=True, default=default)


_OUT = (Result("out"),)
_NATIVES = "vllm_xdsl.ops.natives"
_ACTS = "vllm_xdsl.ops.activations"
_FUSED = "vllm_xdsl.ops.fused"
_E4M3 = DType.F8E4M3FN
# Every quant op and fused op ends with these two: a runtime zero point and the variant text.
_VARIANT = (_opt_t("zero_point", None), Param("variant", "str", default=""))

# --- unfused ----------------------------------------------------------------------------

RMS_NORM = OpSpec(
    "rms_norm", "norm",
    (_t("x"), _opt_t("weight"), Param("epsilon", "float"), _opt_int("variance_size", None)),
    _OUT, f"{_NATIVES}:rms_norm", inplace=(("out", "x"),),
)
FUSED_ADD_RMS_NORM = OpSpec(
    "fused_add_rms_norm", "residual_norm",
    (_t("x"), _t("residual"), _opt_t("weight"), Param("epsilon", "float"),
     Param("rounded_sum", "bool", default=False)),
    (Result("out"), Result("residual_out")), f"{_NATIVES}:fused_add_rms_norm",
    inplace=(("out", "x"), ("residual_out", "residual")),
)
STATIC_SCALED_FP8_QUANT = OpSpec(
    "static_scaled_fp8_quant", "quant",
    (_t("x"), _t("scale"), Param("fp8_dtype", "dtype", default=_E4M3), *_VARIANT),
    (Result("q"),), f"{_NATIVES}:static_scaled_fp8_quant", form=QuantForm("fp8", True, "tensor"),
)
DYNAMIC_SCALED_FP8_QUANT = OpSpec(
    "dynamic_scaled_fp8_quant", "quant",
    (_t("x"), Param("fp8_dtype", "dtype", default=_E4M3), *_VARIANT),
    (Result("q"), Result("scale")), f"{_NATIVES}:dynamic_scaled_fp8_quant",
    form=QuantForm("fp8", False, "tensor"),
    opts_out=(("vllm", "vLLM's per-tensor fp8 kernel floors its scale otherwise: left unraised"),),
)
DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT = OpSpec(
    "dynamic_per_token_scaled_fp8_quant", "quant",
    (_t("x"), _opt_t("scale_ub", None), Param("fp8_dtype", "dtype", default=_E4M3), *_VARIANT),
    (Result("q"), Result("scales")), f"{_NATIVES}:dynamic_per_token_scaled_fp8_quant",
    form=QuantForm("fp8", False, "token"),
)
PER_TOKEN_GROUP_FP8_QUANT = OpSpec(
    "per_token_group_fp8_quant", "quant",
    (_t("x"), Param("group_size", "int"), Param("column_major_scales", "bool", default=False),
     Param("use_ue8m0", "bool", default=False), Param("eps", "float", default=DEFAULT_GROUP_EPS),
     Param("fp8_dtype", "dtype", default=_E4M3), *_VARIANT),
    (Result("q"), Result("scales")), f"{_NATIVES}:per_token_group_fp8_quant",
    form=QuantForm("fp8", False, "group"),
)
STATIC_SCALED_INT8_QUANT = OpSpec(
    "static_scaled_int8_quant", "quant", (_t("x"), _t("scale"), *_VARIANT),
    (Result("q"),), f"{_NATIVES}:static_scaled_int8_quant", form=QuantForm("int8", True, "tensor"),
)
DYNAMIC_PER_TOKEN_SCALED_INT8_QUANT = OpSpec(
    "dynamic_per_token_scaled_int8_quant", "quant", (_t("x"), *_VARIANT),
    (Result("q"), Result("scales")), f"{_NATIVES}:dynamic_per_token_scaled_int8_quant",
    form=QuantForm("int8", False, "token"),
)


def _act_and_mul(name: str, activation: str) -> OpSpec:
    return OpSpec(name, "act_and_mul", (_t("x"), _opt_t("up", None)), _OUT, f"{_ACTS}:{name}",
                  activation=activation)


SILU_AND_MUL = _act_and_mul("silu_and_mul", "silu")
GELU_AND_MUL = _act_and_mul("gelu_and_mul", "gelu")
GELU_TANH_AND_MUL = _act_and_mul("gelu_tanh_and_mul", "gelu_tanh")
# vLLM's FatreluAndMul (MiniCPM-S): gate values at or below `threshold` become 0.
FATRELU_AND_MUL = OpSpec(
    "fatrelu_and_mul", "act_and_mul",
    (_t("x"), Param("threshold", "float", default=0.0), _opt_t("up", None)), _OUT,
    f"{_ACTS}:fatrelu_and_mul", activation="fatrelu",
)
# vLLM IR's Gemma-3n GELU-and-mul: gate values below mean + std * std_multiplier of their
# row are zeroed first; `approximate` picks the GELU ("none" = erf, or "tanh").
GELU_AND_MUL_SPARSE = OpSpec(
    "gelu_and_mul_sparse", "sparse_act_and_mul",
    (_t("x"), Param("std_multiplier", "float"),
     Param("approximate", "str", default="none", choices=("none", "tanh")), _opt_t("up", None)),
    _OUT, f"{_ACTS}:gelu_and_mul_sparse", activation="gelu",
)

# --- fused ------------------------------------------------------------------------------

# The quants a norm or an act-and-mul absorbs (the scheme says which one; dynamic per
# tensor is not fusable: it needs a global reduction first).
FUSABLE_QUANTS: tuple[str, ...] = (
    "static_scaled_fp8_quant", "dynamic_per_token_scaled_fp8_quant", "per_token_group_fp8_quant",
    "static_scaled_int8_quant", "dynamic_per_token_scaled_int8_quant",
)
# The quant scheme as a fused native takes it (core.scheme.QuantScheme, flattened).
SCHEME_PARAMS: tuple[Param, ...] = (
    _opt_t("scale"), _opt_t("scale_ub"), Param("quant_dtype", "dtype"), Param("static", "bool"),
    Param("granularity", "str"), Param("group_size", "int", default=0),
    Param("column_major_scales", "bool", default=False), Param("use_ue8m0", "bool", default=False),
    Param("group_eps", "float", default=DEFAULT_GROUP_EPS), *_VARIANT,
)
_SCALES = Result("scales", optional=True)  # absent in the IR for a static scheme
# A fused op is formed on meaning by fuse-norm-quant, from its producer and a quant raised
# apart (vLLM's fused kernels are raised as those compositions too).
_FORMED = "formed by fuse-norm-quant from its producer and a quant"
_FUSED_OPTS_OUT: tuple[tuple[Piece, str], ...] = (("raise", _FORMED), ("vllm", _FORMED))
# The flat scheme, by role (ops/fused_signature.py converts it to and from a QuantScheme):
# its tensors, and its scalars in QuantScheme's field order.
SCHEME_TENSORS: tuple[str, ...] = ("scale", "scale_ub", "zero_point")
SCHEME_FIELDS: tuple[str, ...] = tuple(
    p.name for p in SCHEME_PARAMS if p.name not in SCHEME_TENSORS
)

RMS_NORM_QUANT = OpSpec(
    "rms_norm_quant", "norm",
    (_t("x"), _opt_t("weight"), Param("epsilon", "float"), *SCHEME_PARAMS),
    (Result("q"), _SCALES), f"{_FUSED}:rms_norm_quant", fused=True, producer="rms_norm",
    quants=FUSABLE_QUANTS, opts_out=_FUSED_OPTS_OUT,
)
FUSED_ADD_RMS_NORM_QUANT = OpSpec(
    "fused_add_rms_norm_quant", "residual_norm",
    (_t("x"), _t("residual"), _opt_t("weight"), Param("epsilon", "float"), *SCHEME_PARAMS,
     Param("rounded_sum", "bool", default=False)),
    (Result("q"), Result("residual_out"), _SCALES), f"{_FUSED}:fused_add_rms_norm_quant",
    inplace=(("residual_out", "residual"),), fused=True, producer="fused_add_rms_norm",
    quants=FUSABLE_QUANTS, opts_out=_FUSED_OPTS_OUT,
)


def _act_and_mul_quant(plain: OpSpec) -> OpSpec:
    # `up` comes last (optional): the one-operand calls keep their meaning.
    name = f"{plain.name}_quant"
    return OpSpec(name, "act_and_mul", (_t("x"), *SCHEME_PARAMS, _opt_t("up", None)),
                  (Result("q"), _SCALES), f"{_FUSED}:{name}", fused=True, producer=plain.name,
                  quants=FUSABLE_QUANTS, activation=plain.activation,
                  opts_out=_FUSED_OPTS_OUT)


SILU_AND_MUL_QUANT = _act_and_mul_quant(SILU_AND_MUL)
GELU_AND_MUL_QUANT = _act_and_mul_quant(GELU_AND_MUL)
GELU_TANH_AND_MUL_QUANT = _act_and_mul_quant(GELU_TANH_AND_MUL)

UNFUSED_SPECS: tuple[OpSpec, ...] = (
    RMS_NORM, FUSED_ADD_RMS_NORM, STATIC_SCALED_FP8_QUANT, DYNAMIC_SCALED_FP8_QUANT,
    DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT, PER_TOKEN_GROUP_FP8_QUANT, STATIC_SCALED_INT8_QUANT,
    DYNAMIC_PER_TOKEN_SCALED_INT8_QUANT, SILU_AND_MUL, GELU_AND_MUL, GELU_TANH_AND_MUL,
    FATRELU_AND_MUL, GELU_AND_MUL_SPARSE,
)
FUSED_SPECS: tuple[OpSpec, ...] = (
    RMS_NORM_QUANT, FUSED_ADD_RMS_NORM_QUANT, SILU_AND_MUL_QUANT, GELU_AND_MUL_QUANT,
    GELU_TANH_AND_MUL_QUANT,
)
SPECS: dict[str, OpSpec] = {s.name: s for s in UNFUSED_SPECS + FUSED_SPECS}


def fused_of(producer: str) -> OpSpec | None:
    """The fused op a producer forms with a quant after it, or None."""
    for spec in FUSED_SPECS:
        if spec.producer == producer:
            return spec
    return None


def quant_specs() -> tuple[OpSpec, ...]:
    """The unfused quant ops (each names its QuantForm)."""
    return tuple(s for s in UNFUSED_SPECS if s.form is not None)


def quant_spec_of(dtype: str, static: bool, granularity: str) -> OpSpec:
    """The unfused quant op of a form ("fp8" or "int8"); KeyError if there is none."""
    for spec in quant_specs():
        if spec.form == QuantForm(dtype, static, granularity):  # type: ignore[arg-type]
            return spec
    raise KeyError(f"no unfused quant op is {dtype} {'static' if static else 'dynamic'} "
                   f"per {granularity}")


def act_and_mul_specs() -> tuple[OpSpec, ...]:
    """The unfused `act(gate) * up` ops (one kernel template each: the activation a code)."""
    return tuple(s for s in UNFUSED_SPECS if s.family == "act_and_mul")


for _spec in SPECS.values():
    _problem = _spec.problem()
    if _problem is not None:
        raise AssertionError(f"catalog: {_spec.name}: {_problem}")
