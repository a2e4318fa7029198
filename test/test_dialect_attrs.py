"""`#vllm.quant` and `#vllm.quant_variant` hold typed parameters (xDSL enum attributes for
modes, granularities, scalings, floors and rounding dtypes) and print as before."""

import pytest
from xdsl.parser import Parser
from xdsl.printer import Printer

from vllm_xdsl.core.dtypes import ROUNDING
from vllm_xdsl.core.scheme import GRANULARITIES
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.dialects import make_context
from vllm_xdsl.dialects.vllm_attrs import (
    QuantGranularity,
    QuantGranularityAttr,
    QuantMode,
    QuantModeAttr,
    QuantSchemeAttr,
    QuantVariantAttr,
    RoundingDType,
    RoundingDTypeAttr,
    VariantFloor,
    VariantScaling,
    VariantScalingAttr,
)

TEXTS = [
    "#vllm.quant<static per_tensor>",
    "#vllm.quant<dynamic per_token>",
    "#vllm.quant<dynamic per_group 128 column_major ue8m0>",
    "#vllm.quant<dynamic per_group 64 eps 1.000000e-06>",
    "#vllm.quant<static per_tensor div quotient bf16>",
    "#vllm.quant<dynamic per_token scale bf16 zero_eps 7.812500e-03 range 1.275000e+02>",
    "#vllm.quant_variant<recip quotient f16>",
    "#vllm.quant_variant<min_scale>",
]


def _round_trip(text: str) -> str:
    import io

    attr = Parser(make_context(), text).parse_attribute()
    out = io.StringIO()
    Printer(out).print_attribute(attr)
    return out.getvalue()


@pytest.mark.parametrize("text", TEXTS)
def test_printed_form_is_unchanged(text: str) -> None:
    assert _round_trip(text) == text


def test_scheme_parameters_are_enum_attributes() -> None:
    attr = Parser(make_context(), TEXTS[5]).parse_attribute()
    assert isinstance(attr, QuantSchemeAttr)
    assert attr.mode == QuantModeAttr(QuantMode.DYNAMIC)
    assert attr.granularity == QuantGranularityAttr(QuantGranularity.TOKEN)
    assert isinstance(attr.variant, QuantVariantAttr)
    assert attr.variant.scale_dtype == RoundingDTypeAttr(RoundingDType.BF16)
    assert attr.variant.floor.data == VariantFloor.ZERO_EPS
    assert attr.variant.scaling == VariantScalingAttr(VariantScaling.DEFAULT)


def test_ir_enums_match_the_core() -> None:
    assert tuple(g.value for g in QuantGranularity) == GRANULARITIES
    assert {d.value for d in RoundingDType} == {d.value for d in ROUNDING}


@pytest.mark.parametrize("spelling", ["", "div", "recip quotient bf16", "scale f16 min_scale",
                                      "zero_eps 0.5 range 100.0", "quotient f16 scale bf16"])
def test_variant_fields_round_trip(spelling: str) -> None:
    variant = parse_variant(spelling)
    assert QuantVariantAttr.from_variant(variant).to_variant() == variant
