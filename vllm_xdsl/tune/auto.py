"""`auto` in a priority list: the hooks eager dispatch and lower-dispatch call.

`install` (this package's `vllm_xdsl.providers` entry point, loaded by the ops registry)
sets them: `auto_decision` for an eager call, `auto_table` for a lowering, which reads the
winners per token bucket and never runs a measurement itself.

`rms_norm=auto` tunes over every registered implementation of the op; `a,b,auto` over
a, b and native only. Candidates are those available for the target that accept the
arguments (the same checks as any dispatch); native is always one. A forced provider
(`p!`) cannot be combined with auto.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vllm_xdsl.ops import dispatch, registry
from vllm_xdsl.ops.dispatch import AutoTable, Decision
from vllm_xdsl.ops.policy import AUTO, Choice, DispatchError
from vllm_xdsl.tune.bucket import Bucket, bucket_of, bucket_range, token_bucket, token_count
from vllm_xdsl.tune.tuner import (
    BucketResult,
    Candidate,
    candidates_of,
    max_tokens,
    tune,
    tuning_now,
)


@dataclass
class AutoChoice:
    """The tuned winners of one op call over token buckets (lowering) or one bucket."""

    op: str
    bucket: Bucket  # tokens = the first bucket
    results: list[BucketResult]
    candidates: list[Candidate]
    rejected: list[tuple[str, str]]  # ineligible before tuning (unavailable, rejects args)

    @property
    def winners(self) -> list[str]:
        return [r.winner for r in self.results]

    @property
    def tokens(self) -> list[int]:
        return [r.bucket.tokens for r in self.results]

    def table(self) -> AutoTable:
        """The winners per bucket, their impls, and why each other provider lost."""
        impls = {c.provider: c.impl for c in self.candidates}
        wins = set(self.winners)
        rejected = list(self.rejected)
        rejected += [(c.provider, "slower in every bucket") for c in self.candidates
                     if c.provider not in wins and not any(c.provider in r.excluded
                                                           for r in self.results)]
        rejected += [(p, f"wrong result: {why}") for r in self.results[:1]
                     for p, why in r.excluded.items()]
        return AutoTable(self.op, tuple(self.tokens), tuple(self.winners),
                         {w: impls[w] for w in wins}, tuple(rejected), tuple(self.notes()))

    def notes(self) -> list[str]:
        """Report lines: per bucket each candidate's time and the winner."""
        lines = []
        for r in self.results:
            times = ", ".join(f"{p} {us:.1f} us" for p, us in sorted(r.times.items(),
                                                                     key=lambda kv: kv[1]))
            extra = "".join(f"; {p} excluded (wrong): {why}" for p, why in r.excluded.items())
            extra += "".join(f"; {p} not measured: {why}" for p, why in r.pruned.items())
            how = {"cache": " (cached)", "table": " (given table)",
                   "budget": " (budget exhausted: previous winner)"}
            lines.append(f"auto T<={r.bucket.tokens}: {r.winner}{how.get(r.source, '')}"
                         f"{' [' + times + ']' if times else ''}{extra}")
        return lines


def eligible(
    op: Any, meta: Mapping[str, Any], choices: Sequence[Choice], source: str, target: str
) -> tuple[list[Candidate], list[tuple[str, str]]]:
    """The candidates auto measures, and the providers left out with the reason."""
    forced = [str(c) for c in choices if c.forced]
    if forced:
        raise DispatchError(f"{op.name}: priority 'auto' cannot be combined with forced "
                            f"{', '.join(forced)} ({source})")
    registry.ensure_loaded()
    named = [c.provider for c in choices if c.provider not in (AUTO, "native")]
    for p in named:
        if not registry.is_known_provider(p):
            raise DispatchError(f"{op.name}: unknown provider {p!r} in priority ({source})")
    pool = named or list(op._impls)
    impls, rejected = [], []
    for p in pool:
        impl = op._impls.get(p)
        why = (f"no {p} implementation of {op.name}" if impl is None
               else impl.unavailable(target) or impl.rejects(meta))
        if why is None:
            impls.append(impl)
        else:
            rejected.append((p, why))
    return candidates_of([*impls, op.native_impl]), rejected


def tune_call(
    op: Any, meta: Mapping[str, Any], choices: Sequence[Choice], source: str, target: str,
    tokens: int | None = None,
) -> AutoChoice:
    """Tune the call's bucket (known token count) or every bucket up to the max."""
    cands, rejected = eligible(op, meta, choices, source, target)
    known = token_count(meta) if tokens is None else tokens
    # Counts above the largest bucket use it, in eager calls as in the runtime selection
    # (so both run the same implementation for the same count).
    top = token_bucket(max_tokens())
    bounds = bucket_range(top) if known is None else [min(token_bucket(known), top)]
    bucket = bucket_of(op.name, meta, target, bounds[0])
    if len(cands) == 1:  # native only: nothing to measure
        results = [BucketResult(bucket.with_tokens(t), "native", source="single")
                   for t in bounds]
        return AutoChoice(op.name, bucket, results, cands, rejected)
    return AutoChoice(op.name, bucket, tune(op, meta, bucket, bounds, cands), cands, rejected)


def auto_decision(
    op: Any, meta: Mapping[str, Any], choices: Sequence[Choice], source: str, target: str
) -> Decision:
    """The eager (known token count) decision under a priority list holding `auto`."""
    if tuning_now():  # an impl being measured dispatches an op itself: do not recurse
        return Decision(op.name, "native", op.native_impl, [(AUTO, "nested call while tuning")])
    if token_count(meta) is None:
        raise DispatchError(f"{op.name}: priority 'auto' needs the token count ({source}); "
                            "lower-dispatch emits a runtime selection over token buckets")
    choice = tune_call(op, meta, choices, source, target)
    r = choice.results[0]
    winner = next(c.impl for c in choice.candidates if c.provider == r.winner)
    rejected = list(choice.rejected)
    rejected += [(p, f"wrong result: {why}") for p, why in r.excluded.items()]
    rejected += [(p, f"slower: {us:.1f} us vs {r.times[r.winner]:.1f} us at T<={r.bucket.tokens}")
                 for p, us in r.times.items() if p != r.winner]
    rejected += [(p, f"not measured: {why}") for p, why in r.pruned.items()]
    return Decision(op.name, r.winner, winner, rejected)


def auto_table(
    op: Any, meta: Mapping[str, Any], choices: Sequence[Choice], source: str, target: str
) -> AutoTable:
    """The lowering's table: winners over the buckets the call's token count allows."""
    return tune_call(op, meta, choices, source, target).table()


def install() -> None:
    """Decide `auto` in priority lists from now on (the registry's entry point calls it)."""
    dispatch.set_auto_policy(auto_decision, auto_table)
