"""`#vllm.quant<...>`: the quantization scheme of a fused op as one attribute.

Syntax (the quant dtype is not here: it is the element type of the op's `q` result):

    #vllm.quant<static per_tensor>
    #vllm.quant<dynamic per_token>
    #vllm.quant<dynamic per_group 128 column_major ue8m0 eps 1.0e-10>

`column_major`, `ue8m0` and `eps` (default 1e-10) are per-group options and optional.
Variant keywords (docs/OPS.md "Variants", core/variant.py) follow, each only where it
differs from the contract:

    #vllm.quant<static per_tensor div quotient bf16>
    #vllm.quant<dynamic per_token scale bf16 zero_eps 7.812500e-03 range 1.275000e+02>

`#vllm.quant_variant<...>` is the same keyword list alone: the `variant` property of the
unfused quant ops, whose scheme the op name says.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import Float64Type, FloatData, IntAttr
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.str_enum import StrEnum

from vllm_xdsl.core.dtypes import DType
from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS, GRANULARITIES, QuantScheme, granularity_of
from vllm_xdsl.core.variant import DEFAULT_VARIANT, Floor, QuantVariant, Scaling, parse_variant


class QuantMode(StrEnum):
    """Whether the scale is an input (static) or computed from the data (dynamic)."""

    STATIC = "static"
    DYNAMIC = "dynamic"


class QuantGranularity(StrEnum):
    """One scale per tensor, per token or per group (core.scheme.GRANULARITIES)."""

    TENSOR = "tensor"
    TOKEN = "token"
    GROUP = "group"


assert tuple(QuantGranularity) == GRANULARITIES, "the IR enum and core.scheme disagree"


@irdl_attr_definition
class QuantModeAttr(EnumAttribute[QuantMode]):
    """A scheme's mode; printed inside `#vllm.quant<...>` as its bare keyword."""

    name = "vllm.quant_mode"


@irdl_attr_definition
class QuantGranularityAttr(EnumAttribute[QuantGranularity]):
    """A scheme's granularity; printed inside `#vllm.quant<...>` as `per_<granularity>`."""

    name = "vllm.quant_granularity"


_KEYWORD_OF_GRANULARITY: dict[QuantGranularity, str] = {g: f"per_{g.value}" for g in QuantGranularity}
_GRANULARITY_OF_KEYWORD = {k: g for g, k in _KEYWORD_OF_GRANULARITY.items()}


def scheme_problem(error: ValueError) -> str:
    """The reason in a QuantScheme's ValueError, without the scheme's repr before it.

    The message is "invalid quant scheme QuantScheme(...): <reason>"; the repr holds ': '
    itself (DType reprs), so the reason follows the repr's closing "): ".
    """
    text = str(error)
    head, sep, reason = text.partition("): ")
    return reason if sep and head.startswith("invalid quant scheme") else text.split(": ", 1)[-1]


# --- variant keywords, shared by #vllm.quant and #vllm.quant_variant ----------------------

_DTYPE_WORDS = ("bf16", "f16", "f32")


def parse_variant_keywords(parser: AttrParser) -> str:
    """The variant keywords at the parser's position, as their canonical spelling."""
    words: list[str] = []
    while True:
        if (w := parser.parse_optional_keyword("div") or parser.parse_optional_keyword("recip")
                or parser.parse_optional_keyword("min_scale")):
            words.append(w)
        elif w := parser.parse_optional_keyword("quotient") or parser.parse_optional_keyword(
                "scale"):
            dtype = next((d for d in _DTYPE_WORDS if parser.parse_optional_keyword(d)), None)
            if dtype is None:
                parser.raise_error(f"expected bf16, f16 or f32 after {w!r}")
            words += [w, dtype]
        elif w := parser.parse_optional_keyword("zero_eps") or parser.parse_optional_keyword(
                "range"):
            words += [w, repr(parser.parse_float())]
        else:
            break
    text = " ".join(words)
    try:
        return parse_variant(text).spelling()
    except ValueError as e:
        parser.raise_error(str(e))


def print_variant(printer: Printer, variant: QuantVariant, leading_space: bool) -> None:
    """The keywords of `parse_variant_keywords`, floats in MLIR's float syntax."""
    words = variant.spelling().split()
    for i, w in enumerate(words):
        if i or leading_space:
            printer.print_string(" ")
        if i and words[i - 1] in ("zero_eps", "range"):
            printer.print_float(float(w), Float64Type())
        else:
            printer.print_string(w)


class VariantScaling(StrEnum):
    """How the quotient is formed (QuantVariant.scaling; DEFAULT: what the op's row says)."""

    DEFAULT = "default"
    DIV = "div"
    RECIP = "recip"


class VariantFloor(StrEnum):
    """The floor of dynamic scales (QuantVariant.floor)."""

    NONE = "none"
    MIN_SCALE = "min_scale"
    ZERO_EPS = "zero_eps"


class RoundingDType(StrEnum):
    """A dtype a quotient or a scale is rounded to (core.dtypes.ROUNDING)."""

    F32 = "f32"
    BF16 = "bf16"
    F16 = "f16"


@irdl_attr_definition
class VariantScalingAttr(EnumAttribute[VariantScaling]):
    name = "vllm.variant_scaling"


@irdl_attr_definition
class VariantFloorAttr(EnumAttribute[VariantFloor]):
    name = "vllm.variant_floor"


@irdl_attr_definition
class RoundingDTypeAttr(EnumAttribute[RoundingDType]):
    name = "vllm.rounding_dtype"


# The core's "" (the contract's value) is an explicit enum member in the IR.
_SCALING_OF: dict[Scaling, VariantScaling] = {"": VariantScaling.DEFAULT, "div": VariantScaling.DIV,
                                          "recip": VariantScaling.RECIP}
_FLOOR_OF: dict[Floor, VariantFloor] = {"": VariantFloor.NONE, "min_scale": VariantFloor.MIN_SCALE,
                                      "zero_eps": VariantFloor.ZERO_EPS}


@irdl_attr_definition
class QuantVariantAttr(ParametrizedAttribute):
    """`#vllm.quant_variant<div quotient bf16>`: the variant of an unfused quant op (and of a
    `#vllm.quant` scheme), one typed parameter per QuantVariant field."""

    name = "vllm.quant_variant"

    scaling: VariantScalingAttr
    quotient_dtype: RoundingDTypeAttr
    scale_dtype: RoundingDTypeAttr
    floor: VariantFloorAttr
    floor_eps: FloatData
    scale_range: FloatData

    @staticmethod
    def from_variant(variant: QuantVariant) -> QuantVariantAttr:
        return QuantVariantAttr(
            VariantScalingAttr(_SCALING_OF[variant.scaling]),
            RoundingDTypeAttr(RoundingDType(variant.quotient_dtype.value)),
            RoundingDTypeAttr(RoundingDType(variant.scale_dtype.value)),
            VariantFloorAttr(_FLOOR_OF[variant.floor]),
            FloatData(variant.floor_eps),
            FloatData(variant.scale_range),
        )

    def to_variant(self) -> QuantVariant:
        scaling = next(k for k, v in _SCALING_OF.items() if v == self.scaling.data)
        floor = next(k for k, v in _FLOOR_OF.items() if v == self.floor.data)
        return QuantVariant(
            scaling,
            DType(self.quotient_dtype.data.value),
            DType(self.scale_dtype.data.value),
            floor,
            self.floor_eps.data,
            self.scale_range.data,
        )

    def verify(self) -> None:
        from xdsl.utils.exceptions import VerifyException

        problem = self.to_variant().problem()
        if problem is not None:
            raise VerifyException(f"invalid quant variant: {problem}")

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        print_variant(printer, self.to_variant(), leading_space=False)
        printer.print_string(">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            text = parse_variant_keywords(parser)
        return list(QuantVariantAttr.from_variant(parse_variant(text)).parameters)


@irdl_attr_definition
class QuantSchemeAttr(ParametrizedAttribute):
    """Static or dynamic; per tensor, token or group; the per-group options."""

    name = "vllm.quant"

    mode: QuantModeAttr
    granularity: QuantGranularityAttr
    group_size: IntAttr
    column_major_scales: IntAttr
    use_ue8m0: IntAttr
    group_eps: FloatData
    variant: QuantVariantAttr

    @staticmethod
    def get(
        *,
        static: bool,
        granularity: str,
        group_size: int = 0,
        column_major_scales: bool = False,
        use_ue8m0: bool = False,
        group_eps: float = DEFAULT_GROUP_EPS,
        variant: QuantVariant = DEFAULT_VARIANT,
    ) -> QuantSchemeAttr:
        return QuantSchemeAttr(
            QuantModeAttr(QuantMode.STATIC if static else QuantMode.DYNAMIC),
            QuantGranularityAttr(QuantGranularity(granularity)),
            IntAttr(group_size),
            IntAttr(int(column_major_scales)),
            IntAttr(int(use_ue8m0)),
            FloatData(group_eps),
            QuantVariantAttr.from_variant(variant),
        )

    @staticmethod
    def from_scheme(scheme: QuantScheme) -> QuantSchemeAttr:
        return QuantSchemeAttr.get(
            static=scheme.static,
            granularity=scheme.granularity,
            group_size=scheme.group_size,
            column_major_scales=scheme.column_major_scales,
            use_ue8m0=scheme.use_ue8m0,
            group_eps=scheme.group_eps,
            variant=scheme.variant,
        )

    @property
    def static(self) -> bool:
        return self.mode.data == QuantMode.STATIC

    def to_scheme(self, dtype: Any) -> QuantScheme:
        """The full scheme, given the quant dtype (a torch dtype or a DType) of the result."""
        return QuantScheme(
            dtype=dtype,
            static=self.static,
            granularity=granularity_of(self.granularity.data.value),
            group_size=self.group_size.data,
            column_major_scales=bool(self.column_major_scales.data),
            use_ue8m0=bool(self.use_ue8m0.data),
            group_eps=self.group_eps.data,
            variant=self.variant.to_variant(),
        )

    def verify(self) -> None:
        from xdsl.utils.exceptions import VerifyException

        # Mode and granularity are enums (any value is one). The dtype does not matter for these structural checks; int8 rules are checked
        # against the result type by the op verifiers.
        problem = _structural_problem(
            self.static,
            self.granularity.data.value,
            self.group_size.data,
            bool(self.column_major_scales.data),
            bool(self.use_ue8m0.data),
            self.group_eps.data,
            self.variant.to_variant().spelling(),
        )
        if problem:
            raise VerifyException(f"invalid quant scheme: {problem}")

    def print_parameters(self, printer: Printer) -> None:
        words = [self.mode.data.value, _KEYWORD_OF_GRANULARITY[self.granularity.data]]
        if self.granularity.data == QuantGranularity.GROUP:
            words.append(str(self.group_size.data))
        if self.column_major_scales.data:
            words.append("column_major")
        if self.use_ue8m0.data:
            words.append("ue8m0")
        printer.print_string(f"<{' '.join(words)}")
        if self.group_eps.data != DEFAULT_GROUP_EPS:
            printer.print_string(" eps ")
            printer.print_float(self.group_eps.data, Float64Type())
        print_variant(printer, self.variant.to_variant(), leading_space=True)
        printer.print_string(">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            mode = parser.expect(
                lambda: (
                    parser.parse_optional_keyword("static")
                    or parser.parse_optional_keyword("dynamic")
                ),
                "expected 'static' or 'dynamic'",
            )
            keyword = parser.parse_identifier(" (per_tensor, per_token or per_group)")
            if keyword not in _GRANULARITY_OF_KEYWORD:
                parser.raise_error(f"expected per_tensor, per_token or per_group, got {keyword!r}")
            granularity = _GRANULARITY_OF_KEYWORD[keyword]
            group_size = parser.parse_integer() if granularity == QuantGranularity.GROUP else 0
            column_major = use_ue8m0 = False
            group_eps = DEFAULT_GROUP_EPS
            while True:
                if parser.parse_optional_keyword("column_major"):
                    column_major = True
                elif parser.parse_optional_keyword("ue8m0"):
                    use_ue8m0 = True
                elif parser.parse_optional_keyword("eps"):
                    group_eps = parser.parse_float()
                else:
                    break
            variant = parse_variant_keywords(parser)
            params: list[Attribute] = [
                QuantModeAttr(QuantMode(mode)),
                QuantGranularityAttr(granularity),
                IntAttr(group_size),
                IntAttr(int(column_major)),
                IntAttr(int(use_ue8m0)),
                FloatData(group_eps),
                QuantVariantAttr.from_variant(parse_variant(variant)),
            ]
            problem = _structural_problem(
                mode == "static", granularity.value, group_size, column_major, use_ue8m0, group_eps,
                variant,
            )
            if problem:
                parser.raise_error(f"invalid quant scheme: {problem}")
        return params


def _structural_problem(
    static: bool, granularity: str, group_size: int, column_major: bool, use_ue8m0: bool,
    group_eps: float = DEFAULT_GROUP_EPS, variant: str = "",
) -> str | None:
    """A scheme problem that holds whatever the quant dtype (fp8 is the permissive one)."""
    fp8: Any = DType.F8E4M3FN  # QuantScheme reads a dtype by name: a DType needs no torch
    try:
        QuantScheme(
            fp8,
            static=static,
            granularity=granularity_of(granularity),
            group_size=group_size,
            column_major_scales=column_major,
            use_ue8m0=use_ue8m0,
            group_eps=group_eps,
            variant=parse_variant(variant),
        )
    except ValueError as e:
        return scheme_problem(e)
    return None
