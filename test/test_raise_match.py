"""The matching and placement helpers that the passes' correctness rests on."""

from __future__ import annotations

from xdsl.dialects.test import TestOp
from xdsl.ir import Block

from vllm_xdsl.transforms.ir.placement import is_before


def test_is_before_agrees_with_block_order() -> None:
    for n in range(1, 8):
        ops = [TestOp() for _ in range(n)]
        Block(ops)
        for i in range(n):
            for j in range(n):
                assert is_before(ops[i], ops[j]) == (i < j), (n, i, j)


def test_is_before_other_block_is_false() -> None:
    a, b = TestOp(), TestOp()
    Block([a])
    Block([b])
    assert not is_before(a, b) and not is_before(b, a)
