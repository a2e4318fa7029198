"""The residual add before an RMSNorm: `rms_norm(a + r)` -> `fused_add_rms_norm(a, r)`,
whose `residual_out` the sum's other users then read.

Both raise-native (on the norm its patterns have just raised) and fuse-norm-quant (on IR
that arrives with the norm raised and the add still a torch call) run this one pattern.
In f16/bf16 (the HF decoder) the graph normalises the sum rounded to that dtype, so the
add becomes the `rounded_sum` variant, which computes exactly that (torch's f16/bf16 add is
the f32 add rounded once; OPS.md "Variants"). In f32 the two variants coincide and the
default spelling is used. Raising onto the f32-sum variant instead would change the norm
by an ulp, which a quant after it turns into fp8 flips: never done. `residual_out` is
bit-identical to the add in every case.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from vllm_xdsl.dialects.vllm import RmsNormOp
from vllm_xdsl.transforms.ir.placement import (
    all_before,
    dominates,
    erase_dead,
    insert_before,
    is_before,
)
from vllm_xdsl.transforms.ir.routing import RoutedPattern
from vllm_xdsl.transforms.raising import match as m
from vllm_xdsl.transforms.raising.build import Epsilon, build_norm


@dataclass
class RaiseResidualAdd(RoutedPattern):
    """`aten::add.Tensor(a, r)` (alpha 1, no broadcast) -> `rms_norm`  =>
    `fused_add_rms_norm(a, r)`, with `rounded_sum` for an f16/bf16 add.

    The guards are the union of the two patterns this one replaces (raise-native's and
    fuse-norm-quant's), each kept because it is needed for the raise to be exact or a gain:
    - no `variance_size`: fused_add_rms_norm cannot express it;
    - a plain add of two tensors of the sum's type in the norm's block: a broadcast or
      type promotion is not the op's sum, and placement is only known within one block;
    - an f32 sum of two values each widened exactly from a narrower dtype
      (`a.float() + r.float()`, vLLM's native) is left to RaiseNormCastBack, which raises
      the norm cast back to that dtype onto fused_add_rms_norm in it, the better op; it
      sees the norm later, so raising the f32 sum first would take that from it (in
      fuse-norm-quant, which has no cast-back pattern, such a sum stays: it remains only
      where raise-native's cast back did not apply);
    - every other live user of the sum comes after the norm (the fused op then stands at
      the norm), or the norm's weight and runtime epsilon are defined before the add (the
      fused op then stands at the add and serves the earlier users too); otherwise the
      add would have to stay beside the fused op, which then reads both addends and
      writes the sum again: more traffic than the add and the norm it replaces.
    """

    OP_TYPES = (RmsNormOp,)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, RmsNormOp) or op.variance_size is not None:
            return
        total = op.x
        add = m.call_of(total, "aten::add.Tensor")
        if add is None or add.parent is not op.parent or (args := m.operands_of(add, 2)) is None:
            return
        a, r = args
        if not (isinstance(a, SSAValue) and isinstance(r, SSAValue)):
            return
        if a.type != total.type or r.type != total.type:
            return
        widened = [m.as_f32_of(v) for v in (a, r)]
        if m.dtype(total) == torch.float32 and all(
            w is not None and w is not v for w, v in zip(widened, (a, r), strict=True)
        ):
            return
        # A dead user (what raise-native's own rewrites left of the decomposition, until the
        # walk erases it) is no reader of the sum: where it stands decides nothing.
        others = [u.operation for u in total.uses
                  if u.operation is not op and not is_trivially_dead(u.operation)]
        at_norm = all_before(op, others)
        if not at_norm and not all(
            dominates(v, add) for v in (op.weight, op.epsilon_value) if v is not None
        ):
            return
        rounded = m.dtype(total) != torch.float32  # the norm reads the sum as the add rounded it
        fused = build_norm(a, r, op.weight, Epsilon.of(op), op.out.type, rounded_sum=rounded)
        insert_before(rewriter, fused, op if at_norm else add)
        rewriter.replace_all_uses_with(op.out, fused.results[0])
        rewriter.erase(op)
        if at_norm:  # the dead users before it keep the add until they go
            rewriter.replace_uses_with_if(
                total, fused.results[1], lambda use: is_before(fused, use.operation))
        else:
            rewriter.replace_all_uses_with(total, fused.results[1])
        erase_dead(add, rewriter)
