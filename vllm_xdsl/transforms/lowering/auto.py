"""lower-dispatch with `auto` in an op's priority list: lower to the tuned winners.

The table comes from the tuner (vllm_xdsl.tune), which attaches to the ops layer by
registration (ops.dispatch.auto_table): this pass reads the winners per token bucket and
measures nothing itself. The tuner measures the candidates on this machine per token
bucket up to VLLM_XDSL_TUNE_MAX_TOKENS, or up to the static token count when the type
knows it.
- One winner for every bucket: the op is lowered as if that provider had been named (its
  dialect op, or the native decomposition Inductor can fuse); no selection at run time.
- Different winners (or a winner without an IR dialect, e.g. out of tree): one
  `auto.<op>` with the table `tokens`/`winners`; at run time it calls the winner of the
  bucket holding the token count (vllm_xdsl/dialects/auto.py, vllm_xdsl/backends/auto).
The dispatch report lists, per bucket, each candidate's time, the winner, and the
candidates excluded for wrong results or not measured.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, StringAttr, i64
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter

from vllm_xdsl.ops import Decision
from vllm_xdsl.ops.dispatch import AutoTable, auto_table
from vllm_xdsl.ops.policy import AUTO, Priority, resolve


def wants_auto(semantic: str, priority: Priority | None, target: str) -> bool:
    """Whether the op's priority list (same sources as any dispatch) holds `auto`."""
    choices, _ = resolve(semantic, priority, target)
    return any(c.provider == AUTO for c in choices)


def decision(table: AutoTable, provider: str) -> Decision:
    """The report's decision for lowering to `provider` (a sole winner, or `auto`)."""
    return Decision(table.op, provider, table.impls[table.winners[-1]], list(table.rejected))


def tune(
    op: Operation, meta: dict[str, Any], priority: Priority | None, target: str
) -> AutoTable:
    """The tuned table of `op` (see the module doc)."""
    return auto_table(op.name.split(".", 1)[1], meta, priority, target)


def sole_winner(table: AutoTable) -> str | None:
    """The provider that wins every bucket, if one does."""
    winners = table.winners
    return winners[0] if len(set(winners)) == 1 else None


def sole_winner_notes(table: AutoTable, winner: str, lowered: tuple[str, ...]) -> tuple[str, ...]:
    """Report notes of an op lowered to its sole winner (`lowered`: that lowering's notes)."""
    span = f"T<={table.tokens[0]}" + (f"..{table.tokens[-1]}" if len(table.winners) > 1
                                      else "")
    return (f"auto: {winner} wins every bucket ({span}): no runtime selection",
            *lowered, *table.notes)


def select_at_run_time(
    op: Operation, table: AutoTable, rewriter: PatternRewriter
) -> tuple[str, ...]:
    """Replace `op` by `auto.<op>` with the winners' table; returns the report notes."""
    semantic = op.name.split(".", 1)[1]
    new = _auto_class(semantic).create(
        operands=list(op.operands),
        result_types=[r.type for r in op.results],
        properties={**op.properties,
                    "tokens": DenseArrayBase.from_list(i64, list(table.tokens)),
                    "winners": ArrayAttr([StringAttr(w) for w in table.winners])},
        attributes=dict(op.attributes),
    )
    rewriter.replace(op, [new])
    return (f"auto: runtime selection over {len(table.winners)} token bucket(s)",
            *table.notes)


def lower_to_fixed_impl(op: Operation, decision: Decision, rewriter: PatternRewriter) -> None:
    """Replace `op` by a one-bucket `auto.<op>` calling `decision`'s provider for any count.

    How a provider without an IR dialect (out of tree) is reached from compiled code.
    """
    semantic = op.name.split(".", 1)[1]
    new = _auto_class(semantic).create(
        operands=list(op.operands),
        result_types=[r.type for r in op.results],
        properties={**op.properties,
                    "tokens": DenseArrayBase.from_list(i64, [1]),
                    "winners": ArrayAttr([StringAttr(decision.provider)])},
        attributes=dict(op.attributes),
    )
    rewriter.replace(op, [new])


def _auto_class(semantic: str) -> type[Operation]:
    from vllm_xdsl.dialects.auto import OPS_BY_NAME

    return OPS_BY_NAME[semantic]
