"""raise-native on IR text: any epsilon value is carried over exactly, the pass is
idempotent, and its options parse the mlir-opt way."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser

from vllm_xdsl.dialects import make_context
from vllm_xdsl.dialects.vllm import RmsNormOp
from vllm_xdsl.transforms import get_pass
from vllm_xdsl.transforms.raising.raise_native import RaiseNativePass

NORM = """
func.func @f(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> tensor<?x64xbf16> {{
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %p = torch.call "aten::pow.Tensor_Scalar"(%xf) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, {eps} : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %yb = torch.call "prims::convert_element_type.default"(%y) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  %o = torch.call "aten::mul.Tensor"(%w, %yb) [#torch.operand<0>, #torch.operand<1>] : (tensor<64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  func.return %o : tensor<?x64xbf16>
}}
"""


def _raise(text: str, **options: bool):
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    RaiseNativePass(**options).apply(ctx, module)
    module.verify()
    return module


@settings(max_examples=40, deadline=None)
@given(st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_subnormal=True))
def test_any_epsilon_is_carried_exactly(eps: float) -> None:
    module = _raise(NORM.format(eps=f"{eps:.17e}"))
    norms = [op for op in module.walk() if isinstance(op, RmsNormOp)]
    assert len(norms) == 1 and norms[0].weight is not None
    assert norms[0].epsilon_float() == eps


def test_pass_is_idempotent() -> None:
    once = _raise(NORM.format(eps="1.0e-05"))
    text = str(once)
    RaiseNativePass().apply(make_context(), once)
    assert str(once) == text
    assert "torch.call" not in text


def test_registered_and_options_parse() -> None:
    from xdsl.utils.arg_spec import parse_pipeline

    assert get_pass("raise-native") is RaiseNativePass
    (spec,) = parse_pipeline("raise-native{exact=true}")
    assert RaiseNativePass.from_pass_spec(spec) == RaiseNativePass(exact=True)
