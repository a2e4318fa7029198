"""KernelSpec: everything that decides the source of one generated Triton kernel.

A spec is plain, frozen, hashable data. It is the cache key of compiled kernels, and the
`triton` provider dialect op's attributes map onto it one to one:

| field           | meaning                                    | IR counterpart                     |
|-----------------|--------------------------------------------|------------------------------------|
| `op`            | semantic op name (OPS.md)                  | the op name                        |
| `dtype`         | activation dtype (x; out of norm/act ops)  | element type of `x`                |
| `weight_dtype`  | norm weight dtype, None = no weight        | element type of `weight` / absent  |
| `epsilon`       | baked constant, None = runtime argument    | `epsilon` f64 property / operand   |
| `variance_size` | columns in the variance, None = all of H   | `variance_size` property           |
| `scheme`        | QuantScheme of the quant (epilogue), or None| `#vllm.quant<...>` + result type  |
| `has_scale_ub`  | dynamic per-token fp8 with a scale_ub input| presence of the `scale_ub` operand |
| `has_up`        | act-and-mul on gate x and a separate up    | presence of the `up` operand       |
| `block_size`    | BLOCK: columns one program covers (the row,| `block_size` property              |
|                 | or a column tile when `tiled`)             |                                    |
| `num_warps`     | warps per program                          | backend choice                     |
| `hw_casts`      | round to bf16 / e4m3fn with the GPU's      | launch choice (the device)         |
|                 | conversions instead of f32 bit arithmetic  |                                    |
| `zero_point`    | None, "tensor", "token" or "group" (per-   | the `zero_point` operand's shape   |
|                 | group schemes): a zero point               |                                    |
| `rounded_sum`   | fused add: the norm reads x + residual     | `rounded_sum` unit property        |
|                 | rounded to dtype (else the f32 sum)        |                                    |
| `approximate`   | gelu_and_mul_sparse's GELU: "none" (erf)   | `approximate` property             |
|                 | or "tanh"; None for every other op         | (absent = "none")                  |

The hidden size and the token count are runtime arguments (masking, dynamic grid), so one
kernel serves every shape whose row fits in `block_size`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from vllm_xdsl.core.catalog import FUSED_SPECS, SPECS, Family, quant_specs
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.core.variant import EPILOGUE_FIELDS, SCALE_FIELDS
from vllm_xdsl.ops.activations import ACTIVATIONS, FUSED_ACT_OPS
from vllm_xdsl.ops.dtypes import FP8_DTYPES

# The template family (templates.py) of each catalog family; the ops of a family are the
# catalog's, unfused and fused with a quant.
_TEMPLATE_OF_FAMILY: dict[Family, str] = {
    "norm": "norm", "residual_norm": "norm", "quant": "quant", "act_and_mul": "act",
    "sparse_act_and_mul": "sparse_act",
}


def _ops_of(template: str) -> tuple[str, ...]:
    return tuple(s.name for s in SPECS.values() if _TEMPLATE_OF_FAMILY[s.family] == template)


NORM_OPS = _ops_of("norm")
# The act-and-mul family (ops/activations.py), plain and fused with a quant.
ACT_OPS = (*ACTIVATIONS, *FUSED_ACT_OPS)
# Act-and-mul ops whose gate is first sparsified by statistics of its row (one block a row).
SPARSE_ACT_OPS = _ops_of("sparse_act")
# The unfused quant ops, with what their scheme must look like: (dtypes, static, granularity)
# (their catalog forms).
_FORM_DTYPES = {"fp8": FP8_DTYPES, "int8": (torch.int8,)}
QUANT_OPS: dict[str, tuple[tuple[torch.dtype, ...], bool, str]] = {
    s.name: (_FORM_DTYPES[s.form.dtype], s.form.static, s.form.granularity)
    for s in quant_specs() if s.form is not None
}
FUSED_QUANT_OPS = tuple(s.name for s in FUSED_SPECS)
ALL_OPS = (*NORM_OPS, *QUANT_OPS, *ACT_OPS, *SPARSE_ACT_OPS)
ACT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def default_num_warps(block_size: int) -> int:
    """Enough threads to keep a row's loads in flight without spilling registers."""
    if block_size >= 32768:
        return 32
    if block_size >= 8192:
        return 16
    if block_size >= 2048:
        return 8
    return 4


# Column tile of kernels without a full-row reduction (see `tileable`): wide rows (a big
# MLP intermediate) are split over several programs instead of one huge block.
MAX_TILE = 4096


def tileable(op: str, scheme: QuantScheme | None) -> bool:
    """Whether the op's kernel needs no reduction over a whole row, so that a row can be
    split into column tiles: the act-and-mul ops and the unfused quants, unquantized or with
    a static or per-group scheme (per-token and per-tensor scales need the whole row)."""
    if op not in ACT_OPS and op not in QUANT_OPS:
        return False
    return scheme is None or scheme.static or scheme.granularity == "group"


def default_block_size(op: str, scheme: QuantScheme | None, width: int) -> int:
    """BLOCK for rows of `width` columns: the whole row, or a column tile if tileable."""
    block = next_pow2(width)
    if not tileable(op, scheme):
        return block
    group = scheme.group_size if scheme is not None and scheme.granularity == "group" else 1
    return min(block, max(MAX_TILE, next_pow2(group)))


def template_of(op: str) -> str:
    """The template family of an op: "norm", "quant", "act" (act-and-mul) or
    "sparse_act" (gelu_and_mul_sparse)."""
    spec = SPECS.get(op)
    if spec is not None:
        return _TEMPLATE_OF_FAMILY[spec.family]
    raise ValueError(f"no Triton template for op {op!r} (known: {', '.join(ALL_OPS)})")


@dataclass(frozen=True)
class KernelSpec:
    """One generated kernel (see the module docstring for the fields)."""

    op: str
    dtype: torch.dtype
    weight_dtype: torch.dtype | None = None
    epsilon: float | None = None
    variance_size: int | None = None
    scheme: QuantScheme | None = None
    has_scale_ub: bool = False
    block_size: int = 1024
    num_warps: int = 4
    hw_casts: bool = False
    has_up: bool = False
    zero_point: str | None = None
    rounded_sum: bool = False
    approximate: str | None = None

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ValueError(f"invalid Triton kernel spec for {self.op}: {problem}")

    @property
    def template(self) -> str:
        return template_of(self.op)

    @property
    def has_weight(self) -> bool:
        return self.weight_dtype is not None

    @property
    def tiled(self) -> bool:
        """Grid (tokens, column tiles): a program covers BLOCK columns of a row."""
        return tileable(self.op, self.scheme)

    @property
    def has_residual(self) -> bool:
        return SPECS[self.op].family == "residual_norm"

    def problem(self) -> str | None:
        """Why this spec cannot be emitted, or None."""
        try:
            family = template_of(self.op)
        except ValueError as e:
            return str(e)
        if self.dtype not in ACT_DTYPES:
            return f"activation dtype must be f16, bf16 or f32, not {self.dtype}"
        if self.block_size < 1 or self.block_size & (self.block_size - 1):
            return f"block_size must be a power of two, not {self.block_size}"
        if self.num_warps < 1 or self.num_warps & (self.num_warps - 1):
            return f"num_warps must be a power of two, not {self.num_warps}"
        if family != "norm" and (self.weight_dtype is not None or self.epsilon is not None):
            return "weight and epsilon belong to the norm ops"
        if self.weight_dtype is not None and self.weight_dtype not in ACT_DTYPES:
            return f"weight dtype must be f16, bf16 or f32, not {self.weight_dtype}"
        if self.variance_size is not None:
            if "variance_size" not in SPECS[self.op].param_names:
                return f"{self.op} has no variance_size"
            if self.variance_size < 1:
                return f"variance_size must be positive, not {self.variance_size}"
        if self.rounded_sum and not self.has_residual:
            return "rounded_sum belongs to the fused add ops only"
        if (self.op in QUANT_OPS or self.op in FUSED_QUANT_OPS) != (self.scheme is not None):
            return "a quant scheme is required by the quant ops and only by them"
        s = self.scheme
        if s is not None and self.op in QUANT_OPS:
            dtypes, static, granularity = QUANT_OPS[self.op]
            if s.dtype not in dtypes or s.static != static or s.granularity != granularity:
                return f"scheme {s} is not the scheme of {self.op}"
        if s is not None and self.op in FUSED_QUANT_OPS and not s.static:
            if s.granularity == "tensor":
                return "dynamic per-tensor quant needs a global reduction; it is unfused only"
        if self.has_up and family not in ("act", "sparse_act"):
            return "a separate up operand belongs to the act-and-mul ops"
        if (family == "sparse_act") != (self.approximate is not None):
            return "approximate belongs to gelu_and_mul_sparse, which needs it"
        if self.approximate not in (None, "none", "tanh"):
            return f"approximate must be 'none' or 'tanh', not {self.approximate!r}"
        zp = self.zero_point
        if zp not in (None, "tensor", "token", "group") or (zp is not None and s is None) or (
                zp == "group" and (s is None or s.granularity != "group")):
            return "a zero point is per tensor, per token or (per-group schemes) per group, of a quant"
        if self.has_scale_ub and (s is None or not s.is_fp8 or s.granularity != "token"):
            return "scale_ub belongs to dynamic per-token fp8 quant only"
        if s is not None and s.granularity == "group":
            g = s.group_size
            if g & (g - 1) or g > self.block_size:
                return f"group_size must be a power of two <= block_size, not {g}"
        return None

    @property
    def name(self) -> str:
        """A readable identifier, unique per spec (used for kernel and module names)."""
        parts = [self.op, _short(self.dtype)]
        if self.weight_dtype is not None:
            parts.append("w" + _short(self.weight_dtype))
        if self.epsilon is not None:
            parts.append("eps" + repr(self.epsilon).replace(".", "p").replace("-", "m"))
        if self.variance_size is not None:
            parts.append(f"var{self.variance_size}")
        if self.rounded_sum:
            parts.append("rsum")
        if self.scheme is not None:
            parts.append(scheme_tag(self.scheme))
        if self.has_scale_ub:
            parts.append("ub")
        if self.has_up:
            parts.append("up")
        if self.approximate == "tanh":
            parts.append("tanh")
        parts += [f"b{self.block_size}", f"nw{self.num_warps}"]
        if self.hw_casts:
            parts.append("hw")
        if self.zero_point is not None:
            parts.append(f"zp{self.zero_point}")
        return "_".join(parts)


def scheme_tag(s: QuantScheme) -> str:
    tag = f"{_short(s.dtype)}_{'static' if s.static else 'dynamic'}_{s.granularity}"
    if s.granularity == "group":
        tag += f"{s.group_size}"
        if s.column_major_scales:
            tag += "_colmajor"
        if s.use_ue8m0:
            tag += "_ue8m0"
        tag += "_geps" + repr(s.group_eps).replace(".", "p").replace("-", "m")
    if not s.variant.is_default:
        tag += "_" + re.sub(r"[^0-9a-z]+", "_", s.variant.spelling().replace(".", "p"))
    return tag


_SHORT = {
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float8_e4m3fn: "e4m3fn",
    torch.float8_e4m3fnuz: "e4m3fnuz",
    torch.int8: "i8",
}


def _short(dtype: torch.dtype) -> str:
    return _SHORT.get(dtype, str(dtype).removeprefix("torch."))


def variant_fields(op: str, args: dict[str, Any]) -> tuple[str, ...]:
    """The quant variant fields the Triton kernel of `op` implements: the scale fields for
    every dynamic scale (per tensor: computed once from the absmax kernel's global absmax)."""
    dynamic = (op in QUANT_OPS and not QUANT_OPS[op][1]) or (
        args.get("static") is False and args.get("granularity") in ("token", "group"))
    return EPILOGUE_FIELDS + SCALE_FIELDS if dynamic else EPILOGUE_FIELDS

