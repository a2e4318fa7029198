"""`select`: choose the implementation of one op call; `DispatchReport`: why, per node.

`select` sees arguments as metadata (tensors replaced by `TensorMeta`), so eager dispatch
(real tensors) and lower-dispatch (IR types) make the same choice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from vllm_xdsl.ops import registry
from vllm_xdsl.ops.impl import DeclaredOp, Impl, TensorMeta
from vllm_xdsl.ops.policy import AUTO, Choice, DispatchError, Priority, resolve


@dataclass(frozen=True)
class Decision:
    """The chosen impl of one op, and each earlier candidate with the reason it was skipped."""

    op: str
    provider: str
    impl: Impl
    rejected: list[tuple[str, str]] = field(default_factory=list)
    # False only where the choice provably read no argument (no `supports_args` was asked,
    # no auto policy): any arguments on the same target get it, so eager dispatch may cache
    # it without a key of dtypes and shapes. True by default: safe for any other producer.
    uses_args: bool = True


@dataclass(frozen=True)
class AutoTable:
    """What tuning decided for one op call over token buckets: all a lowering reads.

    At run time a count of T tokens takes the winner of the first bucket bound >= T (the
    last winner above the last bound)."""

    op: str
    tokens: tuple[int, ...]  # bucket bounds, ascending
    winners: tuple[str, ...]  # the provider of each bucket
    impls: Mapping[str, Impl]  # the impl of each winner
    rejected: tuple[tuple[str, str], ...] = ()  # providers never chosen, and why
    notes: tuple[str, ...] = ()  # report lines: per bucket the times and the winner


# `auto` in a priority list is decided by the tuner, which attaches through the registry's
# entry points (vllm_xdsl.tune): dispatch never imports it. Both hooks take (op, argument
# metadata, the priority choices, their source, target).
# - the policy: one Decision for a call with a known token count (eager dispatch);
# - the table: winners over token buckets (lower-dispatch, where the count may be unknown).
AutoPolicy = Callable[[DeclaredOp, dict[str, Any], tuple[Choice, ...], str, str], Decision]
AutoTuner = Callable[[DeclaredOp, dict[str, Any], tuple[Choice, ...], str, str], AutoTable]
_auto_hooks: tuple[AutoPolicy, AutoTuner] | None = None


def set_auto_policy(policy: AutoPolicy, tuner: AutoTuner) -> None:
    """Install what decides `auto` in priority lists (the tuner's entry point does)."""
    global _auto_hooks
    _auto_hooks = (policy, tuner)


def _tuner(op: DeclaredOp, source: str) -> tuple[AutoPolicy, AutoTuner]:
    registry.ensure_loaded()  # loads the tuner, which installs the hooks
    if _auto_hooks is None:
        why = "; ".join(registry.load_errors()) or "it installed no auto policy"
        raise DispatchError(f"{op.name}: priority 'auto' ({source}) needs the tuner "
                            f"(vllm_xdsl.tune): {why}")
    return _auto_hooks


def auto_table(
    op: DeclaredOp | str, args_meta: Mapping[str, Any], priority: str | Priority | None,
    target: str,
) -> AutoTable:
    """The tuned table of `op` for these arguments, whose priority list holds `auto`."""
    op = _op(op)
    choices, source = resolve(op.name, priority, target)
    return _tuner(op, source)[1](op, meta_args(op, args_meta), choices, source, target)


def _op(op: DeclaredOp | str) -> DeclaredOp:
    if not isinstance(op, str):
        return op
    try:
        return registry.all_ops()[op]
    except KeyError:
        raise DispatchError(f"unknown op {op!r}") from None


def meta_args(
    op: DeclaredOp | str, args: Sequence[Any] | Mapping[str, Any],
    kwargs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Bind arguments to the op's parameters (defaults applied), tensors as TensorMeta."""
    op = _op(op)
    if isinstance(args, Mapping):
        kwargs, args = {**args, **(kwargs or {})}, ()
    try:
        bound = op.signature.bind(*args, **(kwargs or {}))
    except TypeError as e:
        raise DispatchError(f"{op.name}: bad arguments: {e}") from None
    bound.apply_defaults()
    return {
        k: TensorMeta.from_tensor(v) if isinstance(v, torch.Tensor) else v
        for k, v in bound.arguments.items()
    }


def select(
    op: DeclaredOp | str,
    args_meta: Sequence[Any] | Mapping[str, Any],
    priority: str | Priority | None = None,
    target: str = "cuda",
) -> Decision:
    """Choose the impl of `op` for these arguments under the policy (see policy.py).

    `args_meta`: the op's arguments by name (or positionally), tensors as TensorMeta.
    Raises DispatchError for an unknown provider or a forced impl that cannot run. A list
    holding `auto` is decided by the installed auto policy (vllm_xdsl.tune measures).
    """
    op = _op(op)
    meta = meta_args(op, args_meta)
    choices, source = resolve(op.name, priority, target)
    if any(c.provider == AUTO for c in choices):
        return _tuner(op, source)[0](op, meta, choices, source, target)
    if any(c.provider != "native" for c in choices):
        registry.ensure_loaded()
    rejected: list[tuple[str, str]] = []
    uses_args = False
    for c in choices:
        if c.provider == "native":
            return Decision(op.name, "native", op.native_impl, rejected, uses_args)
        impl = op._impls.get(c.provider)
        reason: str | None
        if impl is None:
            if not registry.is_known_provider(c.provider):
                known = ", ".join(sorted(registry.registered_providers() |
                                         set(registry.BUILTIN_PROVIDERS)))
                raise DispatchError(
                    f"{op.name}: unknown provider {c.provider!r} in priority ({source}); "
                    f"known providers: {known}"
                )
            reason = f"no {c.provider} implementation of {op.name}"
        else:
            reason = impl.unavailable(target)
            if reason is None:
                uses_args = uses_args or impl.supports_args is not None
                reason = impl.rejects(meta)
            if reason is None:
                return Decision(op.name, c.provider, impl, rejected, uses_args)
        if c.forced:
            raise DispatchError(
                f"{op.name}: implementation {op.name}:{c.provider} is forced by priority "
                f"({source}) but cannot run: {reason}"
            )
        rejected.append((c.provider, reason))
    raise AssertionError("unreachable: native closes every priority list")


@dataclass
class ReportEntry:
    node: str
    decision: Decision
    # Facts the lowering adds (e.g. in place or copied inputs), printed after the decision.
    notes: tuple[str, ...] = ()


@dataclass
class DispatchReport:
    """Per-node dispatch decisions of one lowering (or of eager calls), printable."""

    entries: list[ReportEntry] = field(default_factory=list)

    def add(self, node: str, decision: Decision, notes: tuple[str, ...] = ()) -> None:
        self.entries.append(ReportEntry(node, decision, tuple(notes)))

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def format(self) -> str:
        lines = [f"dispatch report: {len(self.entries)} node(s)"]
        for e in self.entries:
            d = e.decision
            lines.append(f"{e.node}: {d.op} -> {d.provider}")
            lines.extend(f"    rejected {p}: {why}" for p, why in d.rejected)
            lines.extend(f"    note: {n}" for n in e.notes)
        return "\n".join(lines)
