"""Routing raise-native's patterns by op: each pattern is tried only on the ops its first
check admits, in the pattern list's order, until one rewrites.

Most ops of a model graph match no pattern; trying all of them on every op costs ~6 calls
per op that fail at once. A `RoutedPattern` declares what its first check admits (its
`TARGETS`, the `torch.call` targets, and its `OP_TYPES`), and checks exactly that, so the
routed walk makes the same rewrites as trying every pattern on every op.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from vllm_xdsl.dialects.torch import CallOp


class RoutedPattern(RewritePattern):
    """A pattern that rewrites only instances of `OP_TYPES`, and of `torch.call`s only
    those with a target in `TARGETS` (None: any target)."""

    TARGETS: ClassVar[tuple[str, ...] | None] = None
    OP_TYPES: ClassVar[tuple[type[Operation], ...]] = (CallOp,)

    @classmethod
    def admits(cls, op: Operation) -> bool:
        if not isinstance(op, cls.OP_TYPES):
            return False
        return cls.TARGETS is None or not isinstance(op, CallOp) or op.target.data in cls.TARGETS


@dataclass
class RoutedPatterns(RewritePattern):
    """GreedyRewritePatternApplier(patterns) (a trivially dead op is erased, else the
    patterns in order until one rewrites), each pattern tried only on the ops it admits (a
    pattern that is no RoutedPattern on every op). The lists are cached per op type and
    target."""

    patterns: Sequence[RewritePattern]
    _cache: dict[tuple[type[Operation], str | None], list[RewritePattern]] = field(
        default_factory=dict
    )

    def _candidates(self, op: Operation) -> list[RewritePattern]:
        key = (type(op), op.target.data if isinstance(op, CallOp) else None)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = [
                p for p in self.patterns if not isinstance(p, RoutedPattern) or p.admits(op)
            ]
        return found

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if is_trivially_dead(op):  # as GreedyRewritePatternApplier (dce), one call less per op
            rewriter.erase(op)
            return
        for pattern in self._candidates(op):
            pattern.match_and_rewrite(op, rewriter)
            if rewriter.has_done_action:
                return

