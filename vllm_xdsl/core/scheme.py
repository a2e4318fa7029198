"""Quantization schemes: the one value that says how a fused op quantizes.

A scheme is plain data, shared by the torch ops (as separate arguments), the `vllm`
dialect (as one `#vllm.quant<...>` attribute plus the result element type) and every
backend. One fused op covers every scheme, so no pass or kernel enumerates them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from vllm_xdsl.core.dtypes import QUANT, DType, is_fp8, quant_max
from vllm_xdsl.core.variant import DEFAULT_VARIANT, QuantVariant

if TYPE_CHECKING:
    import torch

Granularity = Literal["tensor", "token", "group"]
GRANULARITIES: tuple[Granularity, ...] = ("tensor", "token", "group")


def granularity_of(text: str) -> Granularity:
    """`text` (from IR or a custom op's str argument) as a Granularity; ValueError if none."""
    for granularity in GRANULARITIES:
        if text == granularity:
            return granularity
    raise ValueError(f"granularity must be one of {GRANULARITIES}, not {text!r}")


# The absmax floor of per-group fp8 quantization (vLLM's per_token_group_fp8_quant eps).
DEFAULT_GROUP_EPS = 1e-10


def _quant_dtype(dtype: Any) -> DType | None:
    try:
        d = DType.of(dtype)
    except ValueError:
        return None
    return d if d in QUANT else None


@dataclass(frozen=True)
class QuantScheme:
    """How values are quantized: target dtype, static or dynamic, and scale granularity.

    - `static`: the dequantization scale is an input (shape [1], per tensor only);
      otherwise it is computed from the data and returned.
    - `granularity`: one scale per tensor, per token (row) or per group of
      `group_size` consecutive elements of a row.
    - `column_major_scales`, `use_ue8m0`, `group_eps`: per-group options (OPS.md).
    - `variant`: where the numerics differ from the OPS.md table (core/variant.py);
      stored canonically (a field equal to the op's own default is reset to the default).

    `dtype` is the torch dtype of `q` (the ops layer passes it to torch as it is); this
    module reads it by name only (core.dtypes.DType.of), so it needs no torch.
    """

    dtype: torch.dtype
    static: bool
    granularity: Granularity
    group_size: int = 0
    column_major_scales: bool = False
    use_ue8m0: bool = False
    group_eps: float = DEFAULT_GROUP_EPS
    variant: QuantVariant = DEFAULT_VARIANT

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ValueError(f"invalid quant scheme {self}: {problem}")
        v = self.variant
        if v.scaling == self.default_scaling:
            v = replace(v, scaling="")
        if v.floor == "min_scale" and self.granularity != "group":
            v = replace(v, floor="")  # the fp8 tensor/token contract floors this way
        object.__setattr__(self, "variant", v)

    @property
    def default_scaling(self) -> str:
        """How the OPS.md row scales: static and per-tensor fp8 multiply by the reciprocal."""
        return "recip" if self.is_fp8 and self.granularity == "tensor" else "div"

    @property
    def scaling(self) -> str:
        """"div" or "recip": what this scheme computes."""
        return self.variant.scaling or self.default_scaling

    def problem(self) -> str | None:
        """Why this scheme is not one of OPS.md's quantizations, or None if it is."""
        quant_dtype = _quant_dtype(self.dtype)
        if quant_dtype is None:
            return f"quant dtype must be fp8 (e4m3fn, e4m3fnuz) or int8, not {self.dtype}"
        if self.granularity not in GRANULARITIES:
            return f"granularity must be one of {GRANULARITIES}, not {self.granularity!r}"
        if self.static and self.granularity != "tensor":
            return "a static scale is per tensor"
        if self.granularity == "group":
            if quant_dtype == DType.I8:
                return "per-group quantization is fp8 only"
            if self.group_size <= 0:
                return "per-group quantization needs a positive group_size"
        elif self.group_size or self.column_major_scales or self.use_ue8m0:
            return "group_size, column_major_scales and use_ue8m0 apply to per-group only"
        if quant_dtype == DType.I8 and not self.static and self.granularity != "token":
            return "dynamic int8 quantization is per token"
        return self.variant_problem()

    def variant_problem(self) -> str | None:
        """Why the variant makes no sense for this scheme (naming the variant), or None."""
        v = self.variant
        problem = v.problem()
        if problem is not None:
            return problem
        if self.static:
            for bad, what in ((v.scale_dtype != DType.F32, "scale"),
                              (v.floor != "", v.floor), (v.scale_range != 0.0, "range")):
                if bad:
                    return f"variant {what!r} applies to dynamic scales (a static scale is an input)"
        if self.granularity == "group" and v.floor and self.group_eps != DEFAULT_GROUP_EPS:
            return f"variant {v.floor!r} replaces the per-group absmax floor: drop eps"
        if v.floor == "min_scale" and not self.is_fp8:
            return "variant 'min_scale' is the fp8 floor 1 / (FMAX * 512), not an int8 one"
        return None

    @property
    def is_fp8(self) -> bool:
        return is_fp8(self.dtype)

    @property
    def qmax(self) -> float:
        return quant_max(self.dtype)
