"""The `auto` dialect: a runtime selection over token buckets, made by autotuning.

`auto.<semantic op>` has the semantic op's operands, results, syntax and verifier, plus
the tuned table of this call site: `tokens` (bucket bounds, ascending powers of two) and
`winners` (the provider measured fastest, and correct, in each bucket). At run time the
op reads the token count, takes the first bucket that holds it (the last one above it)
and calls that provider's implementation (vllm_xdsl/tune/runtime.py). lower-dispatch
emits it for a priority `auto` when the winners differ between buckets, and with a single
bucket (`tokens = [1]`) for a provider that has no dialect of its own (out of tree):

    %y = auto.rms_norm %x weight(%w : tensor<4096xf32>) {epsilon = 1.0e-06 : f64,
           tokens = array<i64: 1, 2, 4, 8>, winners = ["native", "native", "fast", "fast"]}
           : tensor<?x4096xf32> -> tensor<?x4096xf32>
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, StringAttr, i64
from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation, prop_def
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.dialects.vllm import SIGNATURES, SemanticSignature, define_op


def _verify_table(op: IRDLOperation) -> None:
    tokens = op.tokens.get_values()  # type: ignore[attr-defined]
    winners = [w.data for w in op.winners.data]  # type: ignore[attr-defined]
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


def _auto_op(signature: type[SemanticSignature]) -> type[IRDLOperation]:
    def verify_(self: IRDLOperation) -> None:
        signature.verify_(self)  # type: ignore[arg-type]
        _verify_table(self)

    def table(self: Any) -> tuple[list[int], list[str]]:
        return list(self.tokens.get_values()), [w.data for w in self.winners.data]

    def torch_extra_args(self: Any) -> dict[str, Any]:
        """What the exporter passes after the native's arguments (the runtime op's table)."""
        tokens, winners = self.table()
        return {"tokens": tokens, "winners": winners}

    return define_op("auto", signature, {
        "tokens": prop_def(DenseArrayBase.constr(i64)),
        "winners": prop_def(ArrayAttr[StringAttr]),
        "verify_": verify_,
        "table": table,
        "torch_extra_args": torch_extra_args,
    })


Auto = Dialect("auto", [_auto_op(sig) for sig in SIGNATURES])
OPS_BY_NAME = {op.SEMANTIC_NAME: op for op in Auto.operations}  # type: ignore[attr-defined]

# The exporter finds `torch.ops.vllm_xdsl_auto.<op>` once this dialect is in use.
import vllm_xdsl.tune.runtime  # noqa: E402, F401
