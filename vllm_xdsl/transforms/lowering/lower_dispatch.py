"""`lower-dispatch`: turn each `vllm` op into the implementation the dispatch policy picks.

For each semantic op the pass builds the argument metadata from the IR (meta_args.py:
the same TensorMeta view eager dispatch builds from tensors, with the target's device)
and asks `vllm_xdsl.ops.select` (registry + policy; no policy of its own). The chosen
provider's op replaces it: `triton.*`, `cuda.*`, `rocm.*` with the same operands and
results plus implementation properties decided here (block size, vector width, in place),
or, for `native`, the op's elementary torch decomposition (native.py, traced from the native). An
out-of-tree provider has no dialect: its op becomes a one-bucket `auto.<op>` that calls
the registered implementation at run time, so eager and compiled code agree.

Availability at lowering time is about the target: an impl whose `supported` takes a
`target` is asked whether it can serve that target with the toolchain here (so lowering
for cuda on a CPU-only machine can still pick cuda kernels); a zero-argument `supported`
can only say whether it runs on this machine, and is taken as it answers.

Options: `target` (cuda, rocm, cpu; default: the module attribute `vllm.target`, else
cuda), `priority` (e.g. "rms_norm=triton,native;silu_and_mul=cuda!"), `report=true`
(print the dispatch report to stderr). From Python: `lower_dispatch(module, target,
priority) -> DispatchReport`, or `LowerDispatchPass(...).lower(ctx, module)`, which applies
the pass and returns its report (the pipeline's way: the report is a result, not state).
"""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.utils.exceptions import PassFailedException

from vllm_xdsl.dialects.vllm import SemanticSignature
from vllm_xdsl.ops import ALL_OPS, Decision, DispatchError, DispatchReport, parse_priority, select
from vllm_xdsl.ops.policy import AUTO, ENV_VAR, Priority, check_priority, env_text
from vllm_xdsl.transforms.ir.torch_builder import TorchBuilder
from vllm_xdsl.transforms.lowering import auto as dispatch_auto
from vllm_xdsl.transforms.lowering.impl_props import impl_properties
from vllm_xdsl.transforms.lowering.inplace import clone, not_overwritable
from vllm_xdsl.transforms.lowering.meta_args import meta_args
from vllm_xdsl.transforms.lowering.native import NativeNotTraceable, decompose

TARGETS = ("cuda", "rocm", "cpu")
# What supports_args sees as the device of every tensor when lowering for a target. Eager
# dispatch says "cuda" for a ROCm GPU (torch's device type) and target_of() says "rocm":
# providers accept both for rocm, and the lowering names the target it compiles for.
TARGET_DEVICE = {"cuda": "cuda", "rocm": "rocm", "cpu": "cpu"}
PROVIDER_DIALECTS = ("triton", "cuda", "rocm", "cpu")
TARGET_ATTR = "vllm.target"
# Operand positions of the inputs an in-place kernel may overwrite.
_INPUT_INDEX = {"x": 0, "residual": 1}


def semantic_name(op: Operation) -> str | None:
    """The semantic op that a `vllm` op is (its SEMANTIC_NAME), None for any other op
    (provider and auto ops share the signature class, but are lowered already)."""
    if isinstance(op, SemanticSignature) and op.dialect_name() == "vllm":
        return op.SEMANTIC_NAME if op.SEMANTIC_NAME in ALL_OPS else None
    return None


def provider_op_class(provider: str, semantic: str) -> type[SemanticSignature] | None:
    """`<provider>.<semantic>` from vllm_xdsl/dialects/<provider>.py, or None."""
    if provider not in PROVIDER_DIALECTS:
        return None
    return importlib.import_module(f"vllm_xdsl.dialects.{provider}").OPS_BY_NAME.get(semantic)


def printed_names(module: ModuleOp) -> dict[SSAValue, str]:
    """The name the printer gives each named value, `x`, `x_1`, ..., in printing order.

    Name hints repeat in imported graphs (xDSL drops numeric suffixes from hints), so the
    report names a node the way the user sees it in the printed input.
    """
    seen: Counter[str] = Counter()
    names: dict[SSAValue, str] = {}

    def name(value: SSAValue) -> None:
        if value.name_hint:
            count = seen[value.name_hint]
            names[value] = value.name_hint + (f"_{count}" if count else "")
            seen[value.name_hint] += 1

    for op in module.walk():
        for result in op.results:
            name(result)
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    name(arg)
    return names


def _node_name(op: Operation, names: dict[SSAValue, str]) -> str:
    name = names.get(op.results[0]) if op.results else None
    name = name or (op.results[0].name_hint if op.results else None)
    fn = op.parent_op()
    while fn is not None and not isinstance(fn, func.FuncOp):
        fn = fn.parent_op()
    where = f"@{fn.sym_name.data} " if isinstance(fn, func.FuncOp) else ""
    if name is None:
        block = op.parent_block()
        index = list(block.ops).index(op) if block is not None else 0
        return f"{where}#{index} {op.name}"
    return f"{where}%{name}"


@dataclass
class LowerSemanticOp(RewritePattern):
    """One `vllm` op -> the chosen provider op, or its native torch decomposition."""

    target: str
    priority: Priority | None
    report: DispatchReport
    names: dict[SSAValue, str] = field(default_factory=dict)  # printed_names of the input

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        semantic = semantic_name(op)
        if semantic is None:
            return
        node = _node_name(op, self.names)
        meta = meta_args(op, TARGET_DEVICE[self.target])
        try:
            if dispatch_auto.wants_auto(semantic, self.priority, self.target):
                self._lower_auto(op, semantic, meta, rewriter, node)  # autotuning
                return
            decision = select(semantic, meta, self.priority, self.target)
        except DispatchError as e:
            raise DispatchError(f"{node}: {e}") from None
        if decision.provider == "native":
            try:
                new_ops, values = decompose(op)
            except NativeNotTraceable as e:
                # The op stays: export calls its torch op, which runs the native.
                self.report.add(node, decision, (f"kept as the native's torch op: {e}",))
                return
            _name_intermediates(op, new_ops, values)
            rewriter.replace(op, new_ops, values)
            self.report.add(node, decision)
            return
        cls = provider_op_class(decision.provider, semantic)
        if cls is None:  # out of tree: no dialect; called at run time by the registry
            dispatch_auto.lower_to_fixed_impl(op, decision, rewriter)
            self.report.add(node, decision, (f"{decision.provider} has no IR dialect: "
                                             f"auto.{semantic} calls it at run time",))
            return
        props = {**op.properties, **impl_properties(decision.provider, op)}
        operands, copies, notes = self._inplace(op, semantic, cls, decision, props)
        new = cls.create(
            operands=operands,
            result_types=[r.type for r in op.results],
            properties=props,
            attributes=dict(op.attributes),
        )
        rewriter.replace(op, [*copies, new])
        self.report.add(node, decision, tuple(notes))

    def _lower_auto(
        self, op: Operation, semantic: str, meta: dict[str, Any], rewriter: PatternRewriter,
        node: str,
    ) -> None:
        """Tune `op`; lower it to a sole winner that has a lowering of its own as if that
        provider were forced, else to a runtime selection (dispatch_auto)."""
        choice = dispatch_auto.tune(op, meta, self.priority, self.target)
        single = dispatch_auto.sole_winner(choice)
        if single is not None and (single == "native" or provider_op_class(single, semantic)):
            inner = DispatchReport()
            forced = parse_priority(f"{semantic}={single}!")
            LowerSemanticOp(self.target, forced, inner).match_and_rewrite(op, rewriter)
            [entry] = inner.entries
            self.report.add(node, dispatch_auto.decision(choice, single),
                            dispatch_auto.sole_winner_notes(choice, single, entry.notes))
            return
        notes = dispatch_auto.select_at_run_time(op, choice, rewriter)
        self.report.add(node, dispatch_auto.decision(choice, AUTO), notes)

    def _inplace(
        self, op: Operation, semantic: str, cls: type[SemanticSignature], decision: Decision,
        props: dict,
    ) -> tuple[list[SSAValue], list[Operation], list[str]]:
        """Operands for the provider op, copies to insert first, and report notes.

        An impl registered in place always overwrites its inputs: each one not proven
        overwritable is copied first. Otherwise a provider op with an `inplace` property
        gets it only where every overwritten input is proven overwritable.
        """
        # Which inputs an in-place kernel overwrites: the op's contract (ops.inplace_outputs).
        inputs = sorted(set(ALL_OPS[semantic].inplace_outputs.values()),
                        key=lambda name: _INPUT_INDEX[name])
        has_prop = "inplace" in cls.get_irdl_definition().properties and bool(inputs)
        operands = list(op.operands)
        if decision.impl.inplace:
            b = TorchBuilder()
            notes = []
            for name in inputs:
                i = _INPUT_INDEX[name]
                why = not_overwritable(operands[i], op)
                if why is None:
                    notes.append(f"in place: overwrites {name} (its only use)")
                else:
                    operands[i] = clone(b, operands[i])
                    notes.append(f"copied {name} for the in-place kernel: {why}")
            if has_prop:
                props["inplace"] = _unit()
            return operands, b.ops, notes
        if not has_prop:
            return operands, [], []
        whys = [(n, not_overwritable(operands[_INPUT_INDEX[n]], op)) for n in inputs]
        problems = [f"{n}: {why}" for n, why in whys if why is not None]
        if problems:
            return operands, [], [f"out of place: {'; '.join(problems)}"]
        props["inplace"] = _unit()
        return operands, [], [f"in place: overwrites {n} (its only use)" for n in inputs]


def _name_intermediates(op: Operation, new_ops: list[Operation], values: list[SSAValue]) -> None:
    """`%y_t*` for a decomposition's intermediates, so `%y` stays the op's result."""
    base = op.results[0].name_hint
    for new in new_ops:
        for r in new.results:
            if r not in values and base:
                r.name_hint = f"{base}_t"
    for old, new_value in zip(op.results, values, strict=True):
        if old.name_hint and new_value.owner in new_ops:
            new_value.name_hint = old.name_hint


def _unit():  # noqa: ANN202
    from xdsl.dialects.builtin import UnitAttr

    return UnitAttr()


def check_options(target: str, priority: str | Priority | None,
                  prefix: str = "lower-dispatch: ") -> Priority | None:
    """Validate the options (a priority's providers too); DispatchError with one clear line
    otherwise, starting with `prefix`."""
    if target not in TARGETS:
        raise DispatchError(
            f"{prefix}unknown target {target!r} (expected one of {', '.join(TARGETS)})"
        )
    if not isinstance(priority, str):
        return priority
    return check_priority(priority, f"{prefix}option 'priority'") if priority else None


def module_target(module: ModuleOp) -> str:
    """The target named by the module attribute `vllm.target`, else cuda."""
    attr = module.attributes.get(TARGET_ATTR)
    if attr is None:
        return "cuda"
    if not isinstance(attr, StringAttr):
        raise DispatchError(f"lower-dispatch: module attribute {TARGET_ATTR} must be a string")
    return attr.data


def lower_dispatch(
    module: ModuleOp, target: str | None = None, priority: str | Priority | None = None
) -> DispatchReport:
    """Lower every `vllm` op of `module` in place; returns the dispatch report.

    `target`: default from the module attribute `vllm.target`, else cuda. `priority`: the
    explicit source; without it (or for ops it does not name) the same sources as eager
    dispatch decide: `ops.set_priority`, then VLLM_XDSL_PRIORITY, then the target default.

    Raises DispatchError, one line, before any op is lowered for a bad option (a provider
    that `priority` or VLLM_XDSL_PRIORITY names and no one registered included), and naming
    the node, op, impl and reason for a forced impl that cannot run.
    """
    target = target or module_target(module)
    parsed = check_options(target, priority)
    env = env_text()
    if env:  # the source for the ops `priority` does not name, checked before any op too
        check_priority(env, f"lower-dispatch: {ENV_VAR}")
    report = DispatchReport()
    pattern = LowerSemanticOp(target, parsed, report, printed_names(module))
    try:
        PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(module)
    except DispatchError as e:  # drop the walker's note (a dump of the whole module)
        raise DispatchError(str(e)) from None
    return report


@dataclass(frozen=True)
class LowerDispatchPass(ModulePass):
    """Choose an implementation for every vllm op and lower it to that provider's ops."""

    name = "lower-dispatch"

    target: str | None = None
    """cuda, rocm or cpu; unset: the module attribute `vllm.target`, else cuda."""

    priority: str | None = None
    """Provider order per op, e.g. "rms_norm=triton,native;silu_and_mul=cuda!" or
    "triton,native" for every op; `p!` forces p; unset: $VLLM_XDSL_PRIORITY, then the
    target's default."""

    report: bool = False
    """Print the dispatch report (chosen impl per op, rejected candidates) to stderr."""

    def __post_init__(self) -> None:
        # A bad target or priority is a bad option, reported when the pass is made (by
        # vllm-opt as such, before the input is read), not at the first op it concerns.
        try:
            check_options(self.target or "cuda", self.priority, prefix="")
        except DispatchError as e:
            raise ValueError(str(e)) from None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.lower(ctx, op)

    def lower(self, ctx: Context, op: ModuleOp) -> DispatchReport:
        """`apply`, returning the dispatch report (printed too with `report=true`)."""
        try:
            report = lower_dispatch(op, self.target, self.priority)
        except DispatchError as e:
            raise PassFailedException(str(e)) from None
        if self.report:
            print(report.format(), file=sys.stderr)
        return report


__all__ = ["semantic_name", "LowerDispatchPass", "check_options", "lower_dispatch"]
