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

Modules: natives/fused (contracts), op (SemanticOp), impl (Impl, TensorMeta), registry
(providers, entry points), policy (priority strings), dispatch (select, DispatchReport),
eager (cached eager dispatch), tolerance (OPS.md tolerances), grid (OPS.md test grid).
"""

from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.ops import fused as _fused
from vllm_xdsl.ops import natives as _n
from vllm_xdsl.ops import registry
from vllm_xdsl.ops.dispatch import Decision, DispatchReport, meta_args, select
from vllm_xdsl.ops.fused import quant_native, scheme_of
from vllm_xdsl.ops.impl import Impl, RegistrationError, TensorMeta
from vllm_xdsl.ops.op import SemanticOp
from vllm_xdsl.ops.policy import DispatchError, parse_priority, priority, set_priority

rms_norm = SemanticOp("rms_norm", _n.rms_norm, ("out",), inplace_outputs={"out": "x"})
fused_add_rms_norm = SemanticOp(
    "fused_add_rms_norm", _n.fused_add_rms_norm, ("out", "residual_out"),
    inplace_outputs={"out": "x", "residual_out": "residual"},
)
static_scaled_fp8_quant = SemanticOp("static_scaled_fp8_quant", _n.static_scaled_fp8_quant, ("q",))
dynamic_scaled_fp8_quant = SemanticOp(
    "dynamic_scaled_fp8_quant", _n.dynamic_scaled_fp8_quant, ("q", "scale")
)
dynamic_per_token_scaled_fp8_quant = SemanticOp(
    "dynamic_per_token_scaled_fp8_quant", _n.dynamic_per_token_scaled_fp8_quant, ("q", "scales")
)
per_token_group_fp8_quant = SemanticOp(
    "per_token_group_fp8_quant", _n.per_token_group_fp8_quant, ("q", "scales")
)
static_scaled_int8_quant = SemanticOp(
    "static_scaled_int8_quant", _n.static_scaled_int8_quant, ("q",)
)
dynamic_per_token_scaled_int8_quant = SemanticOp(
    "dynamic_per_token_scaled_int8_quant", _n.dynamic_per_token_scaled_int8_quant, ("q", "scales")
)
silu_and_mul = SemanticOp("silu_and_mul", _n.silu_and_mul, ("out",))
gelu_and_mul = SemanticOp("gelu_and_mul", _n.gelu_and_mul, ("out",))
gelu_tanh_and_mul = SemanticOp("gelu_tanh_and_mul", _n.gelu_tanh_and_mul, ("out",))

rms_norm_quant = SemanticOp("rms_norm_quant", _fused.rms_norm_quant, ("q", "scales"), fused=True)
fused_add_rms_norm_quant = SemanticOp(
    "fused_add_rms_norm_quant", _fused.fused_add_rms_norm_quant, ("q", "residual_out", "scales"),
    fused=True, inplace_outputs={"residual_out": "residual"},
)
silu_and_mul_quant = SemanticOp(
    "silu_and_mul_quant", _fused.silu_and_mul_quant, ("q", "scales"), fused=True
)
gelu_and_mul_quant = SemanticOp(
    "gelu_and_mul_quant", _fused.gelu_and_mul_quant, ("q", "scales"), fused=True
)
gelu_tanh_and_mul_quant = SemanticOp(
    "gelu_tanh_and_mul_quant", _fused.gelu_tanh_and_mul_quant, ("q", "scales"), fused=True
)

UNFUSED: tuple[str, ...] = (
    "rms_norm",
    "fused_add_rms_norm",
    "static_scaled_fp8_quant",
    "dynamic_scaled_fp8_quant",
    "dynamic_per_token_scaled_fp8_quant",
    "per_token_group_fp8_quant",
    "static_scaled_int8_quant",
    "dynamic_per_token_scaled_int8_quant",
    "silu_and_mul",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
)
FUSED: tuple[str, ...] = (
    "rms_norm_quant", "fused_add_rms_norm_quant", "silu_and_mul_quant", "gelu_and_mul_quant",
    "gelu_tanh_and_mul_quant",
)
ALL_OPS: dict[str, SemanticOp] = {name: globals()[name] for name in UNFUSED + FUSED}

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
