"""From `triton` provider ops to KernelSpecs, and the `-t triton` listing of a module.

The op's attributes map one to one onto the spec (see spec.py): op name, the element
types of x / weight, the epsilon property (absent: a runtime operand), variance_size, the
quant scheme (scheme attribute or op kind, plus the q element type), the presence of
scale_ub, the rounded_sum variant, gelu_and_mul_sparse's approximate property (absent:
"none"), and the optional block_size / num_warps properties (defaults from the row).
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue

from vllm_xdsl.backends.triton.emit import emit_source
from vllm_xdsl.backends.triton.spec import (
    SPARSE_ACT_OPS,
    KernelSpec,
    default_block_size,
    default_num_warps,
    tileable,
)
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.dialects.types import static_shape, torch_dtype
from vllm_xdsl.dialects.vllm import (
    ActAndMulOp,
    NormOp,
    QuantOp,
    SemanticSignature,
    has_rounded_sum,
)

DIALECT = "triton"


def _int_prop(op: Operation, name: str) -> int | None:
    attr = op.properties.get(name)
    return attr.value.data if isinstance(attr, IntegerAttr) else None


def spec_of_op(op: Operation) -> KernelSpec:
    """The KernelSpec of one `triton.<op>`; ValueError naming the op if it has none."""
    assert isinstance(op, SemanticSignature), f"{op.name} is not a provider op"
    name = op.name.removeprefix(f"{DIALECT}.")
    x_type = op.x.type
    assert isinstance(x_type, TensorType)  # the verifier
    shape = static_shape(x_type)
    if not shape or shape[-1] is None:
        raise ValueError(f"{op.name}: the hidden size of x must be static to emit a kernel")
    has_up = isinstance(op, ActAndMulOp) and op.up is not None
    width = shape[-1] // 2 if isinstance(op, ActAndMulOp) and not has_up else shape[-1]
    weight = op.weight if isinstance(op, NormOp) else None
    scheme = op.quant_scheme() if isinstance(op, QuantOp) else None
    block = _int_prop(op, "block_size") or default_block_size(name, scheme, width)
    if block < width and not tileable(name, scheme):
        raise ValueError(
            f"{op.name}: block_size {block} is smaller than a row ({width} columns);"
            " this kernel reduces over the row in one block"
        )
    approximate = None
    if name in SPARSE_ACT_OPS:
        attr = op.properties.get("approximate")
        approximate = attr.data if isinstance(attr, StringAttr) else "none"
    weight_type = None if weight is None else weight.type
    assert weight_type is None or isinstance(weight_type, TensorType)  # the verifier
    return KernelSpec(
        op=name,
        dtype=torch_dtype(x_type.element_type),
        weight_dtype=None if weight_type is None else torch_dtype(weight_type.element_type),
        epsilon=op.epsilon_float() if isinstance(op, NormOp) else None,
        variance_size=_int_prop(op, "variance_size"),
        scheme=scheme,
        has_scale_ub=isinstance(op, QuantOp) and op.scale_upper_bound() is not None,
        has_up=has_up,
        block_size=block,
        num_warps=_int_prop(op, "num_warps") or default_num_warps(block),
        zero_point=_zero_point_kind(getattr(op, "zero_point", None), scheme, width),
        rounded_sum=has_rounded_sum(op),
        approximate=approximate,
    )


def _zero_point_kind(zp: SSAValue | None, scheme: QuantScheme | None, width: int) -> str | None:
    """As launch._zero_point_kind, from the operand's type: one value, one per row or (the
    verifier's [..., G] of a per-group scheme) one per group."""
    if zp is None or not isinstance(zp.type, TensorType):
        return None
    if static_shape(zp.type) in ((), (1,)):
        return "tensor"
    group = scheme is not None and scheme.granularity == "group" and width // scheme.group_size > 1
    return "group" if group else "token"


def module_specs(module: ModuleOp) -> list[tuple[KernelSpec, list[Operation]]]:
    """Each distinct spec of the module's triton ops, in order, with the ops using it."""
    found: dict[KernelSpec, list[Operation]] = {}
    for op in module.walk():
        if op.dialect_name() == DIALECT:
            found.setdefault(spec_of_op(op), []).append(op)
    return list(found.items())


def emit_module_source(module: ModuleOp) -> str:
    """The generated source of every distinct kernel of the module (`vllm-opt -t triton`)."""
    parts = []
    for spec, users in module_specs(module):
        parts.append(
            f"# ===== {DIALECT}.{spec.op}: kernel {spec.name} ({len(users)} op(s))\n"
            + emit_source(spec)
        )
    if not parts:
        return "# no triton ops: no kernels\n"
    return "\n\n".join(parts)
