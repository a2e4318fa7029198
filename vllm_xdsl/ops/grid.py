"""The OPS.md test grid as concrete op calls, for `python -m vllm_xdsl.verify` and tests.

    for case in cases("rms_norm", full=False, device="cpu"): case.args, case.dtype, case.label

Full grid (OPS.md): dtypes {f16, bf16, f32}, tokens {1, 7, 17, 257}, hidden {16, 64, 4096,
5120}, epsilon {1e-5, 1e-6, 3e-7}, weight present and absent (and a Gemma-style f32 weight
on f16/bf16), both fp8 flavours and every fused quant scheme (with epsilon rotating over
its values for the fused norm+quant ops), and both sums of the fused add ops (f32 and
`rounded_sum`, a keyword argument). The reduced grid keeps every dtype, flavour, scheme
and variant but few shapes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from vllm_xdsl.core import catalog
from vllm_xdsl.core.scheme import DEFAULT_GROUP_EPS
from vllm_xdsl.ops.activations import ACTIVATIONS, FUSED_ACT_OPS
from vllm_xdsl.ops.tolerance import Kind

# Normal(0, 1).icdf(0.95): vLLM's std_multiplier for Gemma-3n's activation_sparsity 0.95.
SPARSE_STD_MULTIPLIER = 1.6448536269514722

E4M3, E4M3UZ = torch.float8_e4m3fn, torch.float8_e4m3fnuz
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_NORM_FAMILIES = ("norm", "residual_norm")
NORM_OPS = tuple(s.name for s in catalog.UNFUSED_SPECS if s.family in _NORM_FAMILIES)
_FUSED_NORM_OPS = tuple(s.name for s in catalog.FUSED_SPECS if s.family in _NORM_FAMILIES)


@dataclass(frozen=True)
class Case:
    op: str
    dtype: torch.dtype  # activation dtype (one verify row per op x provider x dtype)
    args: tuple[Any, ...]
    label: str
    kwargs: dict[str, Any] = field(default_factory=dict)  # variant flags (rounded_sum)

    @property
    def shapeless_label(self) -> str:
        """The label without the shape (`T=`, `H=` / `d=`): shared by the cases of one op,
        dtype, scheme and variant over the grid's shapes (verify applies OPS.md's fp8 exact
        rate to them together)."""
        return re.sub(r" T=\d+ [Hd]=\d+", "", self.label)


@dataclass(frozen=True)
class GridSpec:
    tokens: tuple[int, ...]
    hidden: tuple[int, ...]
    eps: tuple[float, ...]


FULL = GridSpec((1, 7, 17, 257), (16, 64, 4096, 5120), (1e-5, 1e-6, 3e-7))
REDUCED = GridSpec((1, 17), (64,), (1e-6,))

# Fused schemes (OPS.md): (quant_dtype, static, granularity, group options, with scale_ub).
FUSED_SCHEMES: tuple[tuple[torch.dtype, bool, str, dict[str, Any], bool], ...] = (
    (E4M3, True, "tensor", {}, False),
    (E4M3UZ, True, "tensor", {}, False),
    (torch.int8, True, "tensor", {}, False),
    (E4M3, False, "token", {}, False),
    (E4M3, False, "token", {}, True),
    (E4M3UZ, False, "token", {}, False),
    (E4M3, False, "group", {}, False),
    (E4M3, False, "group", {"column_major_scales": True, "use_ue8m0": True}, False),
    (E4M3UZ, False, "group", {}, False),
    (torch.int8, False, "token", {}, False),
)


# Quant variants (docs/OPS.md "Variants") per unfused op: (variant, zero point: None,
# "tensor" ([1]), "token" ([T, 1]) or "group" ([T, G])); the fused ops take VARIANTS_FUSED with every scheme
# they fit. Providers that lack a variant reject it (verify shows them as skipped).
CT_FP8_TOKEN = f"quotient bf16 scale bf16 zero_eps {torch.finfo(torch.bfloat16).eps!r}"
VARIANTS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "static_scaled_fp8_quant": (("div quotient bf16", "tensor"), ("div", None),
                                ("quotient f16", None)),
    "dynamic_scaled_fp8_quant": (("div", None), (CT_FP8_TOKEN, "tensor")),
    "dynamic_per_token_scaled_fp8_quant": (("recip", None), (CT_FP8_TOKEN, "token")),
    "per_token_group_fp8_quant": (("min_scale", None), ("recip quotient bf16", None),
                                  (CT_FP8_TOKEN, "group")),
    "static_scaled_int8_quant": (("quotient bf16", "tensor"), ("recip", None)),
    "dynamic_per_token_scaled_int8_quant": ((CT_FP8_TOKEN + " range 127.5", "token"),
                                            ("recip quotient f16", None)),
}
VARIANTS_FUSED = ("div quotient bf16", "recip quotient f16")


def _zero_point(kind: str | None, tokens: int, device: str, seed: int, groups: int = 1
                ) -> torch.Tensor | None:
    if kind is None:
        return None
    shape = {"tensor": (1,), "token": (tokens, 1)}.get(kind, (tokens, groups))
    return _rand(shape, torch.bfloat16, device, seed).round()


def _rand(shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(device=device, dtype=dtype)


def _own_defaults(op: str) -> tuple[Any, ...]:
    """An act-and-mul op's own scalar parameters at their defaults (its own tests vary
    them); they come before `up`, as in the native."""
    return tuple(p.default for p in catalog.SPECS[op].own_scalars)


def _has_residual(op: str) -> bool:
    return catalog.SPECS[op].family == "residual_norm"


def _args(op: str, **by_name: Any) -> tuple[Any, ...]:
    """`op`'s arguments in its parameter order (catalog) from values by parameter name
    (names it does not take are left out)."""
    return tuple(by_name[name] for name in catalog.SPECS[op].param_names)


def _group_sizes(hidden: int) -> tuple[int, ...]:
    sizes = tuple(g for g in (64, 128) if hidden % g == 0)
    return sizes or (hidden,)


def _weights(h: int, dtype: torch.dtype, device: str, seeds: Iterator[int]
             ) -> Iterator[tuple[str, torch.Tensor | None]]:
    """(label, weight): of x's dtype, absent, and float32 (Gemma's `1 + w`) on f16/bf16."""
    yield "yes", _rand((h,), dtype, device, next(seeds))
    yield "no", None
    if dtype != torch.float32:
        yield "f32", _rand((h,), torch.float32, device, next(seeds))


def _sum_kwargs(rounded: bool) -> tuple[dict[str, Any], str]:
    return ({"rounded_sum": True}, " rounded_sum") if rounded else ({}, "")


def _scheme_label(qd: torch.dtype, static: bool, gran: str, kw: dict, ub: bool) -> str:
    parts = [str(qd).removeprefix("torch."), "static" if static else "dynamic", gran]
    parts += [f"{k}={v}" for k, v in kw.items()]
    return "-".join(parts) + ("-ub" if ub else "")


def cases(op: str, full: bool = False, device: str = "cpu") -> Iterator[Case]:
    """Every grid case of `op` (deterministic inputs, a new seed per case)."""
    g = FULL if full else REDUCED
    seed = itertools.count(1)
    scale = torch.tensor([0.02], device=device)
    ub = torch.tensor([2.5], device=device)
    for dtype, t, h in itertools.product(DTYPES, g.tokens, g.hidden):
        dt = str(dtype).removeprefix("torch.")
        shape, base = (t, h), f"{dt} T={t} H={h}"

        def x(mult: float = 3.0, shape: tuple[int, ...] = shape, dtype: torch.dtype = dtype) -> torch.Tensor:
            return _rand(shape, dtype, device, next(seed), mult)

        if op in NORM_OPS:
            for eps in g.eps:
                for wl, w in _weights(h, dtype, device, seed):
                    lab = f"{base} eps={eps} weight={wl}"
                    if not _has_residual(op):
                        yield Case(op, dtype, (x(), w, eps), lab)
                        continue
                    for rounded in (False, True):
                        kwargs, tag = _sum_kwargs(rounded)
                        yield Case(op, dtype, (x(), x(), w, eps), lab + tag, kwargs)
            continue
        if op in _FUSED_NORM_OPS:
            # Every scheme x weight; epsilon rotates over the grid's values (the full cross
            # product with epsilon would triple the slowest part of --full for no coverage),
            # and so does the sum of the fused add (period 3: each scheme gets both).
            eps_cycle = itertools.cycle(g.eps)
            rounded_cycle = itertools.cycle((False, True, True))
            for wl, w in _weights(h, dtype, device, seed):
                for qd, static, gran, kw, with_ub in FUSED_SCHEMES:
                    for gs in _group_sizes(h) if gran == "group" else (0,):
                        eps = next(eps_cycle)
                        q = (scale if static else None, ub if with_ub else None, qd, static,
                             gran, gs, kw.get("column_major_scales", False),
                             kw.get("use_ue8m0", False))
                        lab = (f"{base} eps={eps} weight={wl} "
                               f"{_scheme_label(qd, static, gran, kw, with_ub)} gs={gs}")
                        if not _has_residual(op):
                            yield Case(op, dtype, (x(), w, eps, *q), lab)
                        else:
                            kwargs, tag = _sum_kwargs(next(rounded_cycle))
                            yield Case(op, dtype, (x(), x(), w, eps, *q), lab + tag, kwargs)
            if not _has_residual(op):
                yield from _fused_variant_cases(op, dtype, base, x, t, h, scale, device,
                                                next(seed))
            continue
        for fp8 in (E4M3, E4M3UZ):
            f8 = f"{base} {str(fp8).removeprefix('torch.')}"
            if op == "static_scaled_fp8_quant":
                yield Case(op, dtype, (x(), scale, fp8), f8)
            elif op == "dynamic_scaled_fp8_quant":
                yield Case(op, dtype, (x(), fp8), f8)
            elif op == "dynamic_per_token_scaled_fp8_quant":
                yield Case(op, dtype, (x(), None, fp8), f8)
                yield Case(op, dtype, (x(), ub, fp8), f8 + " scale_ub")
            elif op == "per_token_group_fp8_quant":
                for gs, cm, ue in itertools.product(_group_sizes(h), (False, True), (False, True)):
                    yield Case(op, dtype, (x(), gs, cm, ue, DEFAULT_GROUP_EPS, fp8),
                               f"{f8} gs={gs} column_major={cm} ue8m0={ue}")
        # Two groups or more, so that a per-group zero point is not one per row.
        vgs = _group_sizes(h)[0] if h > _group_sizes(h)[0] else max(h // 2, 1)
        for variant, zp_kind in VARIANTS.get(op, ()):
            zp = _zero_point(zp_kind, t, device, next(seed), h // vgs)
            lab = f"{base} variant={variant!r}" + (f" zero_point={zp_kind}" if zp_kind else "")
            yield Case(op, dtype, _args(
                op, x=x(), scale=scale, scale_ub=None, fp8_dtype=E4M3, group_size=vgs,
                column_major_scales=False, use_ue8m0=True, eps=DEFAULT_GROUP_EPS,
                zero_point=zp, variant=variant), lab)
        if op in FUSED_ACT_OPS:
            yield from _fused_variant_cases(op, dtype, base, x, t, h, scale, device, next(seed))
        if op == "static_scaled_int8_quant":
            yield Case(op, dtype, (x(), scale), base)
        elif op == "dynamic_per_token_scaled_int8_quant":
            xs = x()
            if t > 1:
                xs[0] = 0  # a zero row: s = 0, q = 0
            yield Case(op, dtype, (xs,), base)
        elif op in ACTIVATIONS:  # x = [gate | up], and gate with a separate up
            own = _own_defaults(op)
            yield Case(op, dtype, (x(shape=(t, 2 * h)), *own), f"{dt} T={t} d={h}")
            yield Case(op, dtype, (x(), *own, x()), f"{dt} T={t} d={h} up")
        elif op == "gelu_and_mul_sparse":  # vLLM's Gemma-3n sparsity (0.95), both GELUs
            for approximate in ("none", "tanh"):
                lab = f"{dt} T={t} d={h} approximate={approximate}"
                yield Case(op, dtype, (x(shape=(t, 2 * h)), SPARSE_STD_MULTIPLIER, approximate), lab)
                yield Case(op, dtype, (x(), SPARSE_STD_MULTIPLIER, approximate, x()), lab + " up")
        elif op in FUSED_ACT_OPS:
            for (qd, static, gran, kw, with_ub), with_up in itertools.product(
                FUSED_SCHEMES, (False, True)
            ):
                for gs in _group_sizes(h) if gran == "group" else (0,):
                    q = (scale if static else None, ub if with_ub else None, qd, static, gran, gs,
                         kw.get("column_major_scales", False), kw.get("use_ue8m0", False))
                    lab = f"{dt} T={t} d={h} {_scheme_label(qd, static, gran, kw, with_ub)}"
                    if with_up:
                        yield Case(op, dtype, (x(), *q, DEFAULT_GROUP_EPS, None, "", x()), lab + " up")
                    else:
                        yield Case(op, dtype, (x(shape=(t, 2 * h)), *q), lab)


def _fused_variant_cases(op: str, dtype: torch.dtype, base: str, x: Any, t: int, h: int,
                         scale: torch.Tensor, device: str, seed: int) -> Iterator[Case]:
    """VARIANTS_FUSED on static fp8 / int8 and dynamic per-token fp8 (act-and-mul: static
    only)."""
    w = _rand((h,), dtype, device, seed)
    for variant in VARIANTS_FUSED:
        for qd, static in ((E4M3, True), (torch.int8, True), (E4M3, False)):
            q = (scale if static else None, None, qd, static, "tensor" if static else "token",
                 0, False, False, DEFAULT_GROUP_EPS, None, variant)
            lab = f"{base} {_scheme_label(qd, static, '', {}, False)} variant={variant!r}"
            if catalog.SPECS[op].family == "norm":
                yield Case(op, dtype, (x(), w, 1e-6, *q), lab)
            elif static:
                yield Case(op, dtype, (x(shape=(t, 2 * h)), *q), lab)


def output_kinds(op: str, n: int) -> tuple[Kind, ...]:
    """Tolerance kind of each output: norm outputs use OPS.md's f16 norm tolerance."""
    if op in NORM_OPS:
        norm: tuple[Kind, ...] = ("norm", "value")
        return norm[:n]
    kinds: list[Kind] = ["value"] * n
    if catalog.SPECS[op].result_names[-1] in ("scale", "scales"):  # computed scales
        kinds[-1] = "scales"
    return tuple(kinds)
