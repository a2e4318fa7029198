"""raise-native's speed-ups change no result: routing ops to the patterns that admit them
rewrites exactly as trying every pattern on every op, and the per-run cast memo sees
rewritten inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.transforms.dead_code_elimination import dce

from vllm_xdsl.dialects import make_context
from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.dialects.vllm import RmsNormOp
from vllm_xdsl.transforms.ir.routing import RoutedPattern, RoutedPatterns
from vllm_xdsl.transforms.raising import match as m
from vllm_xdsl.transforms.raising.act_and_mul import RaiseActAndMul
from vllm_xdsl.transforms.raising.quant import QUANT_PATTERNS
from vllm_xdsl.transforms.raising.raise_native import RaiseNativePass, raise_patterns
from vllm_xdsl.transforms.raising.rms_norm import NORM_PATTERNS

FORMS = Path(__file__).parent / "filecheck" / "raise-native.mlir"


def _parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def _unrouted(module: ModuleOp, exact: bool) -> None:
    """raise-native as it was: every pattern on every op, no cast memo."""
    patterns: list[RewritePattern] = raise_patterns(exact)
    PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(module)
    dce(module)


@pytest.mark.parametrize("exact", [False, True])
def test_routed_pass_rewrites_as_every_pattern_on_every_op(exact: bool) -> None:
    text = FORMS.read_text()
    routed, plain = _parse(text), _parse(text)
    RaiseNativePass(exact=exact).apply(make_context(), routed)
    _unrouted(plain, exact)
    assert "= vllm." in str(routed)  # the forms do raise
    assert str(routed) == str(plain)


def test_patterns_declare_their_first_check() -> None:
    for cls in (*NORM_PATTERNS, *QUANT_PATTERNS, RaiseActAndMul):
        assert issubclass(cls, RoutedPattern), cls


class _Recording(RoutedPattern):
    TARGETS = ("aten::mul.Tensor",)

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        self.seen.append(op.name if not isinstance(op, CallOp) else op.target.data)


class _Anything(RewritePattern):
    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        self.seen.append(op.name)


def test_only_admitted_ops_reach_a_routed_pattern() -> None:
    module = _parse(FORMS.read_text())
    seen: list[str] = []
    anything: list[str] = []
    walker = PatternRewriteWalker(RoutedPatterns([_Recording(seen), _Anything(anything)]))
    walker.rewrite_module(module)
    assert seen and set(seen) == {"aten::mul.Tensor"}
    assert len(anything) == sum(1 for _ in module.walk()) - 1  # every op but the module


CAST = """
func.func @f(%a: tensor<4xbf16>, %b: tensor<4xbf16>) -> tensor<4xf32> {
  %c = torch.call "prims::convert_element_type.default"(%a) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<4xbf16>) -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}
"""


def test_cast_memo_reads_the_current_input() -> None:
    module = _parse(CAST)
    cast = next(op for op in module.walk() if isinstance(op, CallOp))
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    a, b = fn.body.block.args
    with m.memoized_casts():
        assert m.cast_of(cast.results[0]) == (a, torch.float32)
        a.replace_all_uses_with(b)  # a rewrite of the cast's input, after the memo
        assert m.cast_of(cast.results[0]) == (b, torch.float32)
    assert m.cast_of(cast.results[0]) == (b, torch.float32)


def test_fused_add_is_routed_only_to_rms_norm_ops() -> None:
    fused_add = NORM_PATTERNS[3]
    assert fused_add.OP_TYPES == (RmsNormOp,)
    module = _parse(CAST)
    assert not any(fused_add.admits(op) for op in module.walk())

