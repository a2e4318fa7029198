"""Where an op stands in its block, and erasing what a rewrite left dead: the order and
dominance questions the passes ask before they move a value's producer or its users."""

from __future__ import annotations

from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint
from xdsl.transforms.dead_code_elimination import is_trivially_dead


def is_before(a: Operation, b: Operation) -> bool:
    """`a` comes strictly before `b` in the same block.

    Walks forward from both at once instead of taking block indices (each an O(block) walk:
    quadratic over a 32-layer graph): the walk from `a` meets `b`, or the walk from `b`
    ends without meeting `a`, after as many steps as the two are apart, at most."""
    block = a.parent_block()
    if block is None or block is not b.parent_block() or a is b:
        return False
    from_a, from_b = a.next_op, b.next_op
    while True:
        if from_a is b or from_b is None:
            return True
        if from_b is a or from_a is None:
            return False
        from_a, from_b = from_a.next_op, from_b.next_op


def all_before(op: Operation, users: list[Operation]) -> bool:
    return all(is_before(op, u) for u in users)


def uses_after(value: SSAValue, anchor: Operation) -> bool:
    """Every use of `value` is by an op after `anchor` in anchor's block."""
    return all_before(anchor, [use.operation for use in value.uses])


def dominates(value: SSAValue, op: Operation) -> bool:
    """`value` is defined before `op` (an argument of an enclosing block, or an earlier op
    of op's block). Values defined in other blocks count as not dominating (conservative)."""
    if isinstance(value, BlockArgument):
        block: Block | None = op.parent
        while block is not None:
            if value.block is block:
                return True
            parent = block.parent_op()
            block = parent.parent if parent is not None else None
        return False
    owner = value.owner
    return isinstance(owner, Operation) and is_before(owner, op)


def insert_before(rewriter: PatternRewriter, op: Operation, anchor: Operation) -> None:
    rewriter.insert(op, InsertPoint.before(anchor))


def erase_dead(op: Operation, rewriter: PatternRewriter) -> None:
    """Erase `op` if it is trivially dead (unused and without effects: Pure, or a
    side-effect-free torch call), then the producers of its operands that became so."""
    work = [op]
    while work:
        cur = work.pop()
        if cur.parent is None or not is_trivially_dead(cur):
            continue
        producers = [v.owner for v in cur.operands if isinstance(v.owner, Operation)]
        rewriter.erase(cur)
        work.extend(producers)


def erase_if_dead(value: SSAValue, rewriter: PatternRewriter) -> None:
    """Erase `value`'s producer if a rewrite left it trivially dead. Redirected uses
    (`replace_uses_with_if`) do not put the producer back on the worklist, so otherwise the
    walk would find it dead only in one more pass over the whole module."""
    if isinstance(value.owner, Operation) and is_trivially_dead(value.owner):
        rewriter.erase(value.owner)
