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

# One SemanticOp per catalog spec (vllm_xdsl/core/catalog.py): the declaration lives there.
rms_norm = SemanticOp.from_spec(catalog.RMS_NORM)
fused_add_rms_norm = SemanticOp.from_spec(catalog.FUSED_ADD_RMS_NORM)
static_scaled_fp8_quant = SemanticOp.from_spec(catalog.STATIC_SCALED_FP8_QUANT)
dynamic_scaled_fp8_quant = SemanticOp.from_spec(catalog.DYNAMIC_SCALED_FP8_QUANT)
dynamic_per_token_scaled_fp8_quant = SemanticOp.from_spec(catalog.DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT)
per_token_group_fp8_quant = SemanticOp.from_spec(catalog.PER_TOKEN_GROUP_FP8_QUANT)
static_scaled_int8_quant = SemanticOp.from_spec(catalog.STATIC_SCALED_INT8_QUANT)
dynamic_per_token_scaled_int8_quant = SemanticOp.from_spec(
    catalog.DYNAMIC_PER_TOKEN_SCALED_INT8_QUANT
)
silu_and_mul = SemanticOp.from_spec(catalog.SILU_AND_MUL)
gelu_and_mul = SemanticOp.from_spec(catalog.GELU_AND_MUL)
gelu_tanh_and_mul = SemanticOp.from_spec(catalog.GELU_TANH_AND_MUL)
gelu_and_mul_sparse = SemanticOp.from_spec(catalog.GELU_AND_MUL_SPARSE)

rms_norm_quant = SemanticOp.from_spec(catalog.RMS_NORM_QUANT)
fused_add_rms_norm_quant = SemanticOp.from_spec(catalog.FUSED_ADD_RMS_NORM_QUANT)
silu_and_mul_quant = SemanticOp.from_spec(catalog.SILU_AND_MUL_QUANT)
gelu_and_mul_quant = SemanticOp.from_spec(catalog.GELU_AND_MUL_QUANT)
gelu_tanh_and_mul_quant = SemanticOp.from_spec(catalog.GELU_TANH_AND_MUL_QUANT)

UNFUSED: tuple[str, ...] = tuple(spec.name for spec in catalog.UNFUSED_SPECS)
FUSED: tuple[str, ...] = tuple(spec.name for spec in catalog.FUSED_SPECS)
ALL_OPS: dict[str, SemanticOp] = {name: globals()[name] for name in catalog.SPECS}
assert all(op.spec is catalog.SPECS[name] for name, op in ALL_OPS.items())

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
