"""raise-native pattern for vLLM IR's gelu_and_mul_sparse (Gemma-3n), as its native reads
once traced: `gelu(relu(gate - (mean(gate) + std(gate) * m))) * up`.

RaiseActAndMul raises the GELU and the product first (`vllm.gelu(_tanh)_and_mul` of the
sparsified gate); this pattern then recognises the sparsification before it and folds the
whole into `vllm.gelu_and_mul_sparse` with `std_multiplier = m`:

- `mean(gate, [-1], keepdim)` in gate's dtype (`aten.mean.dim`);
- the population std: `aten.std.correction(gate, [-1], correction=0, keepdim)`, or as the
  graph decomposes it, `sqrt(var.correction(gate.float(), [-1], correction=0, keepdim))`
  rounded back to gate's dtype (default level: the decomposition's variance may differ from
  torch's kernel by f32 ulps before that rounding);
- `mean + std * m` with `m` a literal, subtracted from the gate, then `relu`.

Gate and up are the halves of one tensor's last dimension (the op takes that tensor) or two
tensors (`up(...)`). Anything else (another correction, another dim, no keepdim, a sum in
another order) is left as it is: the GELU-and-mul stays raised, the statistics stay torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import Float64Type, FloatAttr, StringAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from vllm_xdsl.dialects.vllm import GeluAndMulOp, GeluAndMulSparseOp, GeluTanhAndMulOp
from vllm_xdsl.transforms.ir.routing import RoutedPattern
from vllm_xdsl.transforms.raising import match as m
from vllm_xdsl.transforms.raising.act_and_mul import half_of


def _row_statistic(v: Any, target: str, gate: SSAValue) -> bool:
    """v is `target(gate, [-1], keepdim=True)` (population statistics: correction 0)."""
    op = m.call_of(v, target) if isinstance(v, SSAValue) else None
    if op is None or m.arg(op, 0) is not gate:
        return False
    dims = m.arg(op, 1, "dim")
    if not (isinstance(dims, list) and len(dims) == 1 and m.is_last_dim(dims[0], gate)):
        return False
    if target == "aten::mean.dim":
        return m.arg(op, 2, "keepdim", default=False) is True and m.arg(op, 3, "dtype", None) is None
    return (m.arg(op, 99, "correction") in (0, 0.0) and m.arg(op, 99, "keepdim") is True
            and m.kwarg_names(op) == {"correction", "keepdim"})


def _is_std_of(v: Any, gate: SSAValue, exact: bool) -> bool:
    """v is gate's population std over its rows, in gate's dtype."""
    if _row_statistic(v, "aten::std.correction", gate):
        return True
    if exact or not isinstance(v, SSAValue) or m.dtype(v) != m.dtype(gate):
        return False
    rounded = m.cast_of(v)
    root = v if rounded is None else rounded[0]
    sqrt = m.call_of(root, "aten::sqrt.default")
    if sqrt is None or (rounded is not None and rounded[1] != m.dtype(gate)):
        return False
    var = m.arg(sqrt, 0)
    var_op = m.call_of(var, "aten::var.correction") if isinstance(var, SSAValue) else None
    widened = m.arg(var_op, 0) if var_op is not None else None
    if not isinstance(widened, SSAValue) or m.as_f32_of(widened) is not gate:
        return False
    return _row_statistic(var, "aten::var.correction", widened)


def _std_multiplier(cutoff: Any, gate: SSAValue, exact: bool) -> float | None:
    """m for `mean(gate) + std(gate) * m` (the sum and the product in the native's order)."""
    add = m.call_of(cutoff, "aten::add.Tensor") if isinstance(cutoff, SSAValue) else None
    args = None if add is None else m.operands_of(add, 2)
    if args is None or not _row_statistic(args[0], "aten::mean.dim", gate):
        return None
    mul = m.call_of(args[1], "aten::mul.Tensor") if isinstance(args[1], SSAValue) else None
    factors = None if mul is None else m.operands_of(mul, 2)
    if factors is None or not m.is_number(factors[1]) or not _is_std_of(factors[0], gate, exact):
        return None
    return float(factors[1])


@dataclass
class RaiseGeluAndMulSparse(RoutedPattern):
    exact: bool = False  # the std as aten.std only (its decomposition differs by f32 ulps)
    TARGETS = None
    OP_TYPES = (GeluAndMulOp, GeluTanhAndMulOp)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: GeluAndMulOp | GeluTanhAndMulOp,
                          rewriter: PatternRewriter) -> None:
        if op.up is None:  # a sparsified gate is never half of a tensor with its up
            return
        relu = m.call_of(op.x, "aten::relu.default")
        sub = None if relu is None else m.call_of(m.arg(relu, 0), "aten::sub.Tensor")
        args = None if sub is None else m.operands_of(sub, 2)
        if args is None or not isinstance(args[0], SSAValue):
            return
        gate = args[0]
        multiplier = _std_multiplier(args[1], gate, self.exact)
        if multiplier is None or not m.same_type(gate, op.up):
            return
        first, second = half_of(gate), half_of(op.up)
        if first is not None and second is not None and first[0] is second[0] \
                and (first[1], second[1]) == (0, 1):
            operands: list[Any] = [first[0], []]
        else:
            operands = [gate, [op.up]]
        props: dict[str, Attribute] = {"std_multiplier": FloatAttr(multiplier, Float64Type())}
        if isinstance(op, GeluTanhAndMulOp):
            props["approximate"] = StringAttr("tanh")
        rewriter.replace(op, GeluAndMulSparseOp.build(
            operands=operands, result_types=[op.out.type], properties=props))
