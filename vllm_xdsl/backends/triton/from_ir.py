"""From `triton` provider ops to KernelSpecs, and the `-t triton` listing of a module.

The op's attributes map one to one onto the spec (see spec.py): op name, the element
types of x / weight, the epsilon property (absent: a runtime operand), variance_size, the
quant scheme (scheme attribute or op kind, plus the q element type), the presence of
scale_ub, and the optional block_size / num_warps properties (defaults from the row).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from vllm_xdsl.backends.triton.emit import emit_source
from vllm_xdsl.backends.triton.spec import (
    QUANT_OPS,
    KernelSpec,
    default_block_size,
    default_num_warps,
    tileable,
)
from vllm_xdsl.dialects.types import static_shape, torch_dtype
from vllm_xdsl.ops.activations import activation_of

DIALECT = "triton"


def _int_prop(op: Operation, name: str) -> int | None:
    attr = getattr(op, name, None)
    return None if attr is None else attr.value.data


def spec_of_op(op: Operation) -> KernelSpec:
    """The KernelSpec of one `triton.<op>`; ValueError naming the op if it has none."""
    name = op.name.removeprefix(f"{DIALECT}.")
    x_type = op.x.type  # type: ignore[attr-defined]
    shape = static_shape(x_type)
    if not shape or shape[-1] is None:
        raise ValueError(f"{op.name}: the hidden size of x must be static to emit a kernel")
    has_up = getattr(op, "up", None) is not None
    width = shape[-1] // 2 if activation_of(name) is not None and not has_up else shape[-1]
    weight = getattr(op, "weight", None)
    scheme = None
    if name in QUANT_OPS or name.endswith("_quant"):
        scheme = op.quant_scheme()  # type: ignore[attr-defined]
    block = _int_prop(op, "block_size") or default_block_size(name, scheme, width)
    if block < width and not tileable(name, scheme):
        raise ValueError(
            f"{op.name}: block_size {block} is smaller than a row ({width} columns);"
            " this kernel reduces over the row in one block"
        )
    norm = hasattr(op, "epsilon_value")
    return KernelSpec(
        op=name,
        dtype=torch_dtype(x_type.element_type),
        weight_dtype=None if weight is None else torch_dtype(weight.type.element_type),
        epsilon=op.epsilon_float() if norm else None,  # type: ignore[attr-defined]
        variance_size=_int_prop(op, "variance_size"),
        scheme=scheme,
        has_scale_ub=getattr(op, "scale_ub", None) is not None,
        has_up=has_up,
        block_size=block,
        num_warps=_int_prop(op, "num_warps") or default_num_warps(block),
    )


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
