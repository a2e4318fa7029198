"""Semantic ops: the native contract of each op (docs/OPS.md), its torch custom op
(`torch.ops.vllm_xdsl.<op>`), the implementation registry and dispatch.

    from vllm_xdsl import ops
    out = ops.rms_norm(x, weight, 1e-6)          # dispatched (eager) / one node (compiled)
    ops.rms_norm.native                          # the contract
    ops.rms_norm.maybe_inplace(...)              # caller donates inputs to in-place impls
    ops.rms_norm.explain(x, weight, 1e-6)        # the eager Decision, nothing run

    @ops.rms_norm.register_impl("triton", supported=..., supports_args=..., inplace=False)
    def rms_norm(x, weight, epsilon, variance_size=None): ...

    ops.set_priority("rms_norm=triton,native")   # or: with ops.priority("..."): ...
    ops.select("rms_norm", {"x": TensorMeta(...), ...}, priority=None, target="cuda")

Each op is declared once, in vllm_xdsl/core/catalog.py (torch-free); this package builds
the SemanticOp of each spec. Modules: natives/fused (contracts), fused_signature (a fused
op's flat scheme arguments <-> QuantScheme), op (SemanticOp), impl (Impl, TensorMeta), registry
(providers, entry points), policy (priority strings), dispatch (select, DispatchReport),
eager (cached eager dispatch), tolerance (OPS.md tolerances), grid (OPS.md test grid).
"""

from vllm_xdsl.core import catalog
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.ops import registry
from vllm_xdsl.ops.dispatch import Decision, DispatchReport, meta_args, select
from vllm_xdsl.ops.fused import quant_native, scheme_of
from vllm_xdsl.ops.impl import Impl, RegistrationError, TensorMeta
from vllm_xdsl.ops.op import SemanticOp
from vllm_xdsl.ops.policy import DispatchError, parse_priority, priority, set_priority

# One SemanticOp per catalog spec (vllm_xdsl/core/catalog.py), where each op is declared:
# `ops.rms_norm` is ALL_OPS["rms_norm"], made from catalog.RMS_NORM.
UNFUSED: tuple[str, ...] = tuple(spec.name for spec in catalog.UNFUSED_SPECS)
FUSED: tuple[str, ...] = tuple(spec.name for spec in catalog.FUSED_SPECS)
ALL_OPS: dict[str, SemanticOp] = {
    name: SemanticOp.from_spec(spec) for name, spec in catalog.SPECS.items()
}
globals().update(ALL_OPS)


def __getattr__(name: str) -> SemanticOp:
    """Only reached for a name that is no op (the ops are module attributes already); to
    the type checker it says that `ops.<op>` is a SemanticOp."""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALL_OPS",
    "Decision",
    "DispatchError",
    "DispatchReport",
    "meta_args",
    "parse_priority",
    "priority",
    "registry",
    "select",
    "set_priority",
    "FUSED",
    "UNFUSED",
    "Impl",
    "QuantScheme",
    "RegistrationError",
    "SemanticOp",
    "TensorMeta",
    "quant_native",
    "scheme_of",
    *ALL_OPS,
]
