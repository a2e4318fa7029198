"""The typed interfaces of the op families (vllm_xdsl/dialects/vllm.py) match the ops.

Passes and backends reach ops only through NormOp, ResidualNormOp, QuantOp and
FusedQuantOp, so each op of every dialect must be in the families its fields say, and a
quant op must answer the optional-part accessors for the fields it has.
"""

import pytest
from xdsl.parser import Parser

from vllm_xdsl.core import catalog
from vllm_xdsl.dialects import auto, cuda, make_context, rocm, triton, vllm
from vllm_xdsl.dialects.vllm import FusedQuantOp, NormOp, QuantOp, ResidualNormOp

ALL_OP_CLASSES = [
    cls
    for table in (vllm.OPS_BY_NAME, triton.OPS_BY_NAME, cuda.OPS_BY_NAME, rocm.OPS_BY_NAME,
                  auto.OPS_BY_NAME)
    for cls in table.values()
]


def _fields(cls: type) -> tuple[set[str], set[str], set[str]]:
    d = cls.get_irdl_definition()
    return {n for n, _ in d.operands}, {n for n, _ in d.results}, set(d.properties)


@pytest.mark.parametrize("cls", ALL_OP_CLASSES, ids=lambda c: c.name)
def test_each_op_is_in_the_families_its_fields_say(cls):
    operands, results, props = _fields(cls)
    assert issubclass(cls, NormOp) == ("epsilon" in props), cls.name
    assert issubclass(cls, ResidualNormOp) == ("residual" in operands), cls.name
    assert issubclass(cls, QuantOp) == ("q" in results), cls.name
    assert issubclass(cls, FusedQuantOp) == ("scheme" in props), cls.name
    if issubclass(cls, NormOp):
        assert {"x", "weight", "epsilon_value"} <= operands
    if issubclass(cls, FusedQuantOp):
        assert {"scale", "scale_ub"} <= operands and "scales" in results


@pytest.mark.parametrize("cls", [c for c in ALL_OP_CLASSES if issubclass(c, QuantOp)],
                         ids=lambda c: c.name)
def test_quant_ops_answer_for_the_optional_parts_they_have(cls):
    operands, results, _ = _fields(cls)
    form = catalog.SPECS[cls.SEMANTIC_NAME].form
    if form is not None:
        # The unfused quant family answers from the op's form (the catalog), which must
        # agree with the fields its member was generated with.
        assert form.static == ("scale" in operands) == (results == {"q"}), cls.name
        return
    overrides = {name for name in ("static_scale", "scale_upper_bound", "computed_scales")
                 if getattr(cls, name) is not getattr(QuantOp, name)}
    want = set()
    if "scale" in operands:
        want.add("static_scale")
    if "scale_ub" in operands:
        want.add("scale_upper_bound")
    if results - {"q", "residual_out"}:
        want.add("computed_scales")
    assert overrides == want, cls.name


IR = """
func.func @f(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>, %r: tensor<?x64xbf16>,
             %s: tensor<1xf32>, %e: tensor<f64>) {
  %q0 = vllm.static_scaled_fp8_quant %x, %s : tensor<?x64xbf16>, tensor<1xf32> -> tensor<?x64xf8E4M3FN>
  %q1, %s1 = vllm.dynamic_per_token_scaled_fp8_quant %x scale_ub(%s : tensor<1xf32>) : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
  %q2, %ro, %s2 = vllm.fused_add_rms_norm_quant %x, %r weight(%w : tensor<64xbf16>) epsilon(%e : tensor<f64>) {scheme = #vllm.quant<dynamic per_token>} : tensor<?x64xbf16>, tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x64xbf16>, tensor<?x1xf32>
  %y = vllm.rms_norm %x {epsilon = 1.0e-06 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
"""


def test_accessors_give_the_ops_own_values():
    module = Parser(make_context(), IR).parse_module()
    module.verify()
    fn = module.body.block.first_op
    static, per_token, fused, norm = list(fn.body.block.ops)[:4]
    x, w, r, s, e = fn.body.block.args
    assert isinstance(static, QuantOp) and static.static_scale() is s
    assert static.scale_upper_bound() is None and static.computed_scales() is None
    assert isinstance(per_token, QuantOp) and per_token.static_scale() is None
    assert per_token.scale_upper_bound() is s and per_token.computed_scales() is per_token.results[1]
    assert isinstance(fused, FusedQuantOp) and isinstance(fused, ResidualNormOp)
    assert fused.residual is r and fused.residual_out is fused.results[1]
    assert fused.weight is w and fused.epsilon_float() is None and fused.epsilon_arg() is e
    assert fused.computed_scales() is fused.results[2] and fused.static_scale() is None
    assert fused.quant_scheme().granularity == "token"
    assert isinstance(norm, NormOp) and not isinstance(norm, ResidualNormOp)
    assert norm.weight is None and norm.epsilon_arg() == 1e-6
