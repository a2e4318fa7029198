"""The activation-and-mul family: `act(gate) * up` for act in silu, gelu (erf), gelu (tanh),
fatrelu.

One contract, parameterised by the activation (vLLM's `SiluAndMul` and
`GeluAndMul(approximate="none" | "tanh")`), on one operand or two:

- `x[..., 2d]`, `up=None`: gate = `x[..., :d]`, up = `x[..., d:]` (a fused gate_up
  projection, as vLLM's MLPs have);
- `x[..., d]` and `up[..., d]`: separate gate and up projections (the HF Llama, Qwen,
  Mistral and Gemma MLPs: `act_fn(gate_proj(x)) * up_proj(x)`), same shape and dtype.

Computed in the dtype of x as torch computes it: the activation is rounded to that dtype
(torch's f16/bf16 kernels compute it in f32 and round once), then the product is rounded
once. One signature family: each op is `ACT_AND_MUL[activation]` (plain) or its fused quant
twin, so no activation has its own copy of the argument checks.

Annotations are real (no `from __future__ import annotations`): torch.library infers the
custom op schemas from them.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from vllm_xdsl.core import catalog

# Semantic op name -> the activation it applies (vLLM's op names), from the catalog.
ACTIVATIONS: dict[str, str] = {
    s.name: s.activation for s in catalog.act_and_mul_specs() if s.activation is not None
}
# The fused quant twin of each (the catalog names its producer).
FUSED_ACT_OPS: tuple[str, ...] = tuple(
    s.name for s in catalog.FUSED_SPECS if s.producer in ACTIVATIONS
)


def activation_of(op: str) -> str | None:
    """The activation of an act-and-mul op (plain or fused quant), else None."""
    spec = catalog.SPECS.get(op)
    return spec.activation if spec is not None and spec.family == "act_and_mul" else None


def apply_activation(activation: str, a: Tensor) -> Tensor:
    """torch's own activation, in a's dtype (the rounding point of the contract)."""
    if activation == "silu":
        return torch.nn.functional.silu(a)
    if activation == "gelu":
        return torch.nn.functional.gelu(a)
    if activation == "gelu_tanh":
        return torch.nn.functional.gelu(a, approximate="tanh")
    raise ValueError(f"unknown activation {activation!r} (known: silu, gelu, gelu_tanh)")


def gate_and_up(op: str, x: Tensor, up: Tensor | None) -> tuple[Tensor, Tensor]:
    """The (gate, up) operands of an act-and-mul call; ValueError naming the op if invalid."""
    if up is None:
        h = x.shape[-1] if x.dim() else 1
        d = h // 2
        if x.dim() == 0 or h != 2 * d:
            raise ValueError(f"{op}: last dimension {h if x.dim() else 0} is not even")
        # Two slices, as models write it (their fake values are reused at export, where a
        # [..., 2, d] view and its unbind cost ~3 ms of symbolic shape work per layer);
        # for an unknown h the native lowering cannot spell `d`, and keeps the op.
        return x[..., :d], x[..., d:]
    if up.shape != x.shape or up.dtype != x.dtype:
        raise ValueError(
            f"{op}: up {tuple(up.shape)} {up.dtype} must have the shape and dtype of "
            f"x {tuple(x.shape)} {x.dtype}"
        )
    return x, up


def act_and_mul(activation: str, op: str, x: Tensor, up: Tensor | None) -> Tensor:
    gate, u = gate_and_up(op, x, up)
    return apply_activation(activation, gate) * u


def _plain_native(op: str, activation: str) -> Callable[..., Tensor]:
    """The native of an act-and-mul op without parameters of its own: its activation
    (apply_activation) times up."""

    def native(x: Tensor, up: Tensor | None = None) -> Tensor:
        return act_and_mul(activation, op, x, up)

    native.__name__ = native.__qualname__ = op
    return native


def fatrelu_and_mul(x: Tensor, threshold: float = 0.0, up: Tensor | None = None) -> Tensor:
    """vLLM's FatreluAndMul: `F.threshold(gate, threshold, 0.0) * up` in x's dtype. torch
    compares the f16/bf16 gate with the f32 threshold (not a rounded one) and keeps NaN."""
    gate, u = gate_and_up("fatrelu_and_mul", x, up)
    return torch.nn.functional.threshold(gate, threshold, 0.0) * u


# Every act-and-mul native by op name (`activations.<op>`, the catalog's reference): derived
# for an op without parameters of its own, written above for one with them (fatrelu_and_mul).
ACT_AND_MUL: dict[str, Callable[..., Tensor]] = {
    name: globals()[name] if catalog.SPECS[name].own_scalars else _plain_native(name, act)
    for name, act in ACTIVATIONS.items()
}


def __getattr__(name: str) -> Callable[..., Tensor]:
    """`activations.<op>`: the derived natives too (the catalog's native references)."""
    try:
        return ACT_AND_MUL[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def gelu_and_mul_sparse(
    x: Tensor, std_multiplier: float, approximate: str = "none", up: Tensor | None = None
) -> Tensor:
    """vLLM IR's gelu_and_mul_sparse (Gemma-3n), op for op in x's dtype: per row of the
    gate, `cutoff = mean + std * std_multiplier` (population std), the gate becomes
    `relu(gate - cutoff)`, then `gelu(gate, approximate) * up`."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu_and_mul_sparse: approximate must be 'none' or 'tanh', "
                         f"not {approximate!r}")
    gate, u = gate_and_up("gelu_and_mul_sparse", x, up)
    mean = torch.mean(gate, dim=-1, keepdim=True)
    std = torch.std(gate, dim=-1, keepdim=True, unbiased=False)
    sparse_gate = torch.nn.functional.relu(gate - (mean + std * std_multiplier))
    return torch.nn.functional.gelu(sparse_gate, approximate=approximate) * u
