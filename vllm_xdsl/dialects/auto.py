"""The `auto` dialect: a runtime selection over token buckets, made by autotuning.

`auto.<semantic op>` has the semantic op's operands, results, syntax and verifier, plus
the tuned table of this call site: `tokens` (bucket bounds, ascending powers of two) and
`winners` (the provider measured fastest, and correct, in each bucket). At run time the
op reads the token count, takes the first bucket that holds it (the last one above it)
and calls that provider's implementation (vllm_xdsl/backends/auto/torch_ops.py, loaded by
the exporter like any provider's torch ops: the dialect imports no runtime). lower-dispatch
emits it for a priority `auto` when the winners differ between buckets, and with a single
bucket (`tokens = [1]`) for a provider that has no dialect of its own (out of tree):

    %y = auto.rms_norm %x weight(%w : tensor<4096xf32>) {epsilon = 1.0e-06 : f64,
           tokens = array<i64: 1, 2, 4, 8>, winners = ["native", "native", "fast", "fast"]}
           : tensor<?x4096xf32> -> tensor<?x4096xf32>
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from xdsl.dialects.builtin import I64, ArrayAttr, DenseArrayBase, StringAttr, i64
from xdsl.ir import Dialect
from xdsl.irdl import prop_def
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.dialects.vllm import SIGNATURES, SemanticSignature, define_op


class AutoSelectionOp(SemanticSignature):
    """Interface of every `auto.<op>`: its semantic op's signature plus the tuned table."""

    if TYPE_CHECKING:  # defined per op (prop_def), next to the signature's own fields
        tokens: DenseArrayBase[I64]
        winners: ArrayAttr[StringAttr]

    def table(self) -> tuple[list[int], list[str]]:
        return list(self.tokens.get_values()), [w.data for w in self.winners.data]

    def torch_extra_args(self) -> dict[str, Any]:
        """The runtime op's table, passed after the native's arguments."""
        tokens, winners = self.table()
        return {"tokens": tokens, "winners": winners}


def _verify_table(op: AutoSelectionOp) -> None:
    tokens, winners = op.table()
    if not tokens or len(tokens) != len(winners):
        raise VerifyException(
            f"tokens and winners must be non-empty and of equal length, got {len(tokens)} "
            f"and {len(winners)}"
        )
    if any(t < 1 or t & (t - 1) for t in tokens) or list(tokens) != sorted(set(tokens)):
        raise VerifyException(f"tokens must be ascending powers of two, got {list(tokens)}")
    bad = [w for w in winners if not w.isidentifier() or w == "auto"]
    if bad:
        raise VerifyException(f"winners must be provider names, got {bad[0]!r}")


def _auto_op(signature: type[SemanticSignature]) -> type[AutoSelectionOp]:
    def verify_(self: AutoSelectionOp) -> None:
        signature.verify_(self)
        _verify_table(self)

    op = define_op("auto", signature, {
        "tokens": prop_def(DenseArrayBase.constr(i64)),
        "winners": prop_def(ArrayAttr[StringAttr]),
        "verify_": verify_,
    }, interfaces=(AutoSelectionOp,))
    return cast(type[AutoSelectionOp], op)


_AUTO_OPS = [_auto_op(sig) for sig in SIGNATURES]
Auto = Dialect("auto", list(_AUTO_OPS))
OPS_BY_NAME: dict[str, type[AutoSelectionOp]] = {op.SEMANTIC_NAME: op for op in _AUTO_OPS}
