"""Site types, and how they are counted: from the model's execution (module calls, the
ground truth), from the captured aten graph (a cross-check), and from the IR after
raise-native and fuse-norm-quant (what the pipeline recognised).

Site types:
- norm: an RMSNorm computation;
- residual: an add whose sum feeds a norm (a candidate for fused_add_rms_norm);
- act: an activation-and-mul (SiLU/GELU of the gate times the up projection);
- quant: a quantization of an activation (and, where compressed-tensors fake-quantizes
  weights inside the forward, of a weight);
- pairs: norm->quant and act->quant pairs a fusion could cover (dynamic per-tensor fp8
  excepted: it needs the global max before any value is quantized).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.fx

KINDS = ("norm", "residual", "act", "quant")


@dataclass(frozen=True)
class Sites:
    norm: int = 0
    residual: int = 0
    act: int = 0
    quant: int = 0
    pairs: int = 0  # fusable pairs (totals) or fused ops formed (measured)

    def __add__(self, other: Sites) -> Sites:
        return Sites(*(a + b for a, b in zip(self.astuple(), other.astuple(), strict=True)))

    def astuple(self) -> tuple[int, int, int, int, int]:
        return (self.norm, self.residual, self.act, self.quant, self.pairs)


def op_kinds(name: str) -> set[str]:
    """The site types a `vllm.*` op covers (a fused op covers several). An op whose name
    says nothing we know is an error: a new op must be classified here, not ignored."""
    op = name.removeprefix("vllm.")
    kinds = set()
    if "rms_norm" in op:
        kinds.add("norm")
    if "fused_add" in op:
        kinds.add("residual")
    if "_and_mul" in op:
        kinds.add("act")
    if "quant" in op:
        kinds.add("quant")
    if not kinds:
        raise ValueError(f"corpus: unclassified semantic op {name!r} (add it to sites.op_kinds)")
    return kinds


def raised_sites(after_raise: Counter[str], after_fuse: Counter[str]) -> Sites:
    """Sites raised (op counts after raise-native) and fused ops formed (after
    fuse-norm-quant: ops that cover a quant together with a norm or an act)."""
    per_kind = Counter[str]()
    for name, n in after_raise.items():
        if name.startswith("vllm."):
            for kind in op_kinds(name):
                per_kind[kind] += n
    fused = 0
    for name, n in after_fuse.items():
        if name.startswith("vllm."):
            kinds = op_kinds(name)
            if "quant" in kinds and kinds & {"norm", "act"}:
                fused += n
    return Sites(per_kind["norm"], per_kind["residual"], per_kind["act"], per_kind["quant"], fused)


# --- the aten graph cross-check -------------------------------------------------------

_ATEN = torch.ops.aten
_PASS_THROUGH = {
    torch.ops.prims.convert_element_type.default, _ATEN._to_copy.default,
    _ATEN.view.default, _ATEN.reshape.default, _ATEN.clone.default,
}
_QUANT_DTYPES = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)


# Ops whose value does not depend on their tensor operands' values.
_VALUE_FREE = {_ATEN.full.default, _ATEN.full_like.default, _ATEN.zeros_like.default,
               _ATEN.ones_like.default, _ATEN.empty_like.default, _ATEN.zeros.default,
               _ATEN.sym_size.int}


def _data_dependent(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """Nodes whose value depends on the values of the graph's tensor inputs (a cast of a
    constant, like compressed-tensors' dynamic zero point `zeros(...).to(fp8)`, does not)."""
    dependent: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        values = val if isinstance(val, (tuple, list)) else (val,)  # multi-result ops: SDPA
        if not any(isinstance(v, torch.Tensor) for v in values):
            continue
        if node.op == "placeholder":
            dependent.add(node)
        elif node.op == "call_function" and node.target not in _VALUE_FREE:
            operands = [a for a in node.all_input_nodes if a in dependent]
            if operands:
                dependent.add(node)
    return dependent


def _producer(node: object) -> object:
    while isinstance(node, torch.fx.Node) and node.target in _PASS_THROUGH:
        node = node.args[0]
    return node


def graph_sites(graphs: Iterable[torch.fx.GraphModule]) -> Sites:
    """Norms, residual adds and quants as the aten graph spells them: one `rsqrt` per
    RMSNorm; an `add` of two tensors that (through casts and views) is the squared input of
    a norm; one cast to fp8 or one `round` (compressed-tensors' int8) of a value that
    depends on the inputs per quant. Acts and pairs are not counted here (0): their
    decompositions are not unique in the graph."""
    norm = residual = quant = 0
    for gm in graphs:
        dependent = _data_dependent(gm)
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            if node not in dependent:
                continue
            if node.target is _ATEN.rsqrt.default:
                norm += 1
            elif node.target is _ATEN.pow.Tensor_Scalar and node.args[1] == 2:
                src = _producer(node.args[0])
                if (isinstance(src, torch.fx.Node) and src.target is _ATEN.add.Tensor
                        and all(isinstance(a, torch.fx.Node) for a in src.args[:2])
                        and any(u.target is _ATEN.mean.dim for u in node.users)):
                    residual += 1
            elif node.target is torch.ops.prims.convert_element_type.default:
                quant += node.args[1] in _QUANT_DTYPES
            elif node.target is _ATEN._to_copy.default:
                quant += node.kwargs.get("dtype") in _QUANT_DTYPES
            elif node.target is _ATEN.round.default:
                quant += 1
    return Sites(norm, residual, 0, quant, 0)
