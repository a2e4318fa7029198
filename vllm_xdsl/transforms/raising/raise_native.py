"""`raise-native`: recognise native decompositions in `torch.call` chains and raise them
into semantic ops (`vllm.rms_norm`, `vllm.fused_add_rms_norm`, the quants (fp8
static, dynamic per tensor, per token, per token group; int8 static, per token), `vllm.silu_and_mul`,
`vllm.gelu_and_mul`, `vllm.gelu_tanh_and_mul`, `vllm.fatrelu_and_mul`,
`vllm.gelu_and_mul_sparse`), for any epsilon: a literal eps becomes the `epsilon` property, an eps
that the graph passes in (dynamic=True) becomes the runtime `epsilon(...)` operand.

A pattern replaces only the last value of a chain; intermediate values with other users
stay, so nothing that is read elsewhere changes. Dead `torch.call`s left behind are removed
by xDSL's dead code elimination where their effects allow (torch.TorchCallEffects).

Which forms map, and how exactly, is documented per family in rms_norm.py (with
residual_add.py), quant.py and act_and_mul.py; vLLM's own spellings (vLLM IR nodes, `_C`
and AITER kernel calls) in vllm_forms.py. Two levels:

- default: every rounding to a storage dtype (f16/bf16/fp8) happens where the contract
  has it; only f32 arithmetic may differ by ulps, the freedom OPS.md gives kernels
  (`x / sqrt` vs `x * rsqrt`, divide vs reciprocal multiply, Inductor's decomposed
  silu and gelu);
- `exact=true`: only forms that are bit-exact with the native contract.

A form that rounds at another point than the contract (the HF residual sum rounded to
f16/bf16 before the norm, an f16 quotient before fp8) is raised at both levels as the exact
variant it computes (fused_add_rms_norm{rounded_sum}, the quant variants of quant.py;
docs/OPS.md "Variants"), never approximately.

| form (as Inductor's decomposed aten graph spells it)            | raised to                  | level   |
|------------------------------------------------------------------|----------------------------|---------|
| `xf * rsqrt(mean(xf^2, -1, keepdim) + eps)`, eps literal/0-d input | rms_norm (f32 x)           | exact   |
| `... / sqrt(...)`                                                | rms_norm                   | default |
| then `.to(x.dtype)` (`convert_element_type` or `_to_copy`)        | rms_norm(x)                | exact   |
| `* w` after the cast, w of x's dtype / before it, any float w     | weight(w) / weight(w.f32)  | exact   |
| `* (1 + w.float())` (Gemma)                                      | weight(that f32 value)     | exact   |
| `x.float() + r.float()` before the norm (vLLM native), f32 `x + r` | fused_add_rms_norm         | exact   |
| `x + r` in f16/bf16 before the norm (HF)                         | fused_add_rms_norm{rounded_sum} | exact |
| `x.float() * scale.reciprocal()` (f32 reciprocal), clamp(+-FMAX), fp8 | static_scaled_fp8_quant | exact   |
| `x / scale` in f32, or rounded to f16/bf16 (+ a zero point)      | static, variant `div quotient ..` | exact |
| `clamp_min(amax(abs(x)) / FMAX, 1/(FMAX*512))`, `x.float() / s`  | dynamic_per_token (+scale_ub) | exact |
| same with `max(dim)`+unsqueeze, `* s.reciprocal()` (vLLM native) | dynamic_per_token `recip`  | exact   |
| compressed-tensors' bf16 scales, `where(s == 0, eps)`, int8 round | the OPS.md "Variants" rows | exact   |
| per tensor, per group (`x.view(.., G, gs)`, ue8m0, vLLM's floor)  | dynamic / per_token_group  | exact   |
| FMAX as a graph input (a float global under dynamic=True)         | -                          | never   |
| `silu(x[..., :d]) * x[..., d:]`, slice/split/chunk, aten.silu    | silu_and_mul               | exact   |
| `silu(gate) * up`, two tensors of one type (any rank)            | silu_and_mul up(...)       | exact   |
| `aten.gelu(gate[, approximate="tanh"]) * up` (halves or two)     | gelu(_tanh)_and_mul        | exact   |
| Inductor's decomposed silu (`xf / (1 + exp(-xf))`, `xf * sigmoid(xf)`) | silu_and_mul         | default |
| Inductor's decomposed gelu / tanh gelu (act_and_mul.py)          | gelu(_tanh)_and_mul        | default |
| `gelu(relu(gate - (mean + std * m))) * up`, aten.std (gelu_and_mul_sparse.py) | gelu_and_mul_sparse | as its GELU |
| the same with std as `sqrt(var(gate.float()))` rounded            | gelu_and_mul_sparse        | default |

Never raised (the meaning differs): a mean over another dim, no keepdim, eps added after
the rsqrt, a non-scalar or negative eps, another power than 2, clamp bounds other than
+-FMAX of the result's fp8 type (e4m3fn 448, e4m3fnuz 224), a reciprocal rounded to
f16/bf16, an activation kept in f32 for the product, a broadcasting product, and any weight
multiply whose rounding is not the contract's (an f32 weight on a bf16 norm output: the
norm is raised and the multiply stays).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriteWalker, RewritePattern
from xdsl.transforms.dead_code_elimination import dce

from vllm_xdsl.transforms.ir.routing import RoutedPatterns
from vllm_xdsl.transforms.raising.act_and_mul import RaiseActAndMul
from vllm_xdsl.transforms.raising.gelu_and_mul_sparse import RaiseGeluAndMulSparse
from vllm_xdsl.transforms.raising.match import memoized_casts
from vllm_xdsl.transforms.raising.quant import QUANT_PATTERNS
from vllm_xdsl.transforms.raising.rms_norm import NORM_PATTERNS
from vllm_xdsl.transforms.raising.vllm_forms import VLLM_PATTERNS

PATTERNS = (*VLLM_PATTERNS, *NORM_PATTERNS, *QUANT_PATTERNS, RaiseActAndMul, RaiseGeluAndMulSparse)


def raise_patterns(exact: bool) -> list[RewritePattern]:
    """One instance of every raising pattern; `exact` goes to those that also raise a form
    that is not bit-exact (the others raise only exact forms, at both levels)."""
    made: list[RewritePattern] = []
    for p in PATTERNS:
        make: Callable[..., RewritePattern] = p
        made.append(make(exact=exact) if any(f.name == "exact" for f in fields(p)) else make())
    return made


@dataclass(frozen=True)
class RaiseNativePass(ModulePass):
    """Raise RMSNorm (and the residual add before it), the fp8/int8 quants and the act-and-mul
    ops (SiLU, GELU, GELU-tanh, FATReLU, sparse GELU) into vllm ops, from their torch
    decompositions and from vLLM's own calls (vLLM IR, _C, AITER)."""

    name = "raise-native"

    exact: bool = False
    """Raise only forms that are bit-exact with the contract."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = raise_patterns(self.exact)
        with memoized_casts():
            PatternRewriteWalker(RoutedPatterns(patterns)).rewrite_module(op)
        dce(op)  # what the raised chains left: torch.calls declare their effects
