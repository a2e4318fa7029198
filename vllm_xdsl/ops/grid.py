"""The OPS.md test grid as concrete op calls, for `python -m vllm_xdsl.verify` and tests.

    for case in cases("rms_norm", full=False, device="cpu"): case.args, case.dtype, case.label

Full grid (OPS.md): dtypes {f16, bf16, f32}, tokens {1, 7, 17, 257}, hidden {16, 64, 4096,
5120}, epsilon {1e-5, 1e-6, 3e-7}, weight present and absent, both fp8 flavours and every
fused quant scheme (with epsilon rotating over its values for the fused norm+quant ops).
The reduced grid keeps every dtype, flavour and scheme but few shapes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from vllm_xdsl.ops.activations import ACTIVATIONS, FUSED_ACT_OPS
from vllm_xdsl.ops.tolerance import Kind

E4M3, E4M3UZ = torch.float8_e4m3fn, torch.float8_e4m3fnuz
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
NORM_OPS = ("rms_norm", "fused_add_rms_norm")


@dataclass(frozen=True)
class Case:
    op: str
    dtype: torch.dtype  # activation dtype (one verify row per op x provider x dtype)
    args: tuple[Any, ...]
    label: str


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


def _rand(shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(device=device, dtype=dtype)


def _group_sizes(hidden: int) -> tuple[int, ...]:
    sizes = tuple(g for g in (64, 128) if hidden % g == 0)
    return sizes or (hidden,)


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
            for eps, with_w in itertools.product(g.eps, (True, False)):
                w = _rand((h,), dtype, device, next(seed)) if with_w else None
                lab = f"{base} eps={eps} weight={'yes' if with_w else 'no'}"
                if op == "rms_norm":
                    yield Case(op, dtype, (x(), w, eps), lab)
                else:
                    yield Case(op, dtype, (x(), x(), w, eps), lab)
            continue
        if op in ("rms_norm_quant", "fused_add_rms_norm_quant"):
            # Every scheme x weight; epsilon rotates over the grid's values (the full cross
            # product with epsilon would triple the slowest part of --full for no coverage).
            eps_cycle = itertools.cycle(g.eps)
            for with_w in (True, False):
                w = _rand((h,), dtype, device, next(seed)) if with_w else None
                for qd, static, gran, kw, with_ub in FUSED_SCHEMES:
                    for gs in _group_sizes(h) if gran == "group" else (0,):
                        eps = next(eps_cycle)
                        q = (scale if static else None, ub if with_ub else None, qd, static,
                             gran, gs, kw.get("column_major_scales", False),
                             kw.get("use_ue8m0", False))
                        lab = (f"{base} eps={eps} weight={'yes' if with_w else 'no'} "
                               f"{_scheme_label(qd, static, gran, kw, with_ub)} gs={gs}")
                        if op == "rms_norm_quant":
                            yield Case(op, dtype, (x(), w, eps, *q), lab)
                        else:
                            yield Case(op, dtype, (x(), x(), w, eps, *q), lab)
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
                    yield Case(op, dtype, (x(), gs, cm, ue, 1e-10, fp8),
                               f"{f8} gs={gs} column_major={cm} ue8m0={ue}")
        if op == "static_scaled_int8_quant":
            yield Case(op, dtype, (x(), scale), base)
        elif op == "dynamic_per_token_scaled_int8_quant":
            xs = x()
            if t > 1:
                xs[0] = 0  # a zero row: s = 0, q = 0
            yield Case(op, dtype, (xs,), base)
        elif op in ACTIVATIONS:  # x = [gate | up], and gate with a separate up
            yield Case(op, dtype, (x(shape=(t, 2 * h)),), f"{dt} T={t} d={h}")
            yield Case(op, dtype, (x(), x()), f"{dt} T={t} d={h} up")
        elif op in FUSED_ACT_OPS:
            for (qd, static, gran, kw, with_ub), with_up in itertools.product(
                FUSED_SCHEMES, (False, True)
            ):
                for gs in _group_sizes(h) if gran == "group" else (0,):
                    q = (scale if static else None, ub if with_ub else None, qd, static, gran, gs,
                         kw.get("column_major_scales", False), kw.get("use_ue8m0", False))
                    lab = f"{dt} T={t} d={h} {_scheme_label(qd, static, gran, kw, with_ub)}"
                    if with_up:
                        yield Case(op, dtype, (x(), *q, 1e-10, x()), lab + " up")
                    else:
                        yield Case(op, dtype, (x(shape=(t, 2 * h)), *q), lab)


def output_kinds(op: str, n: int) -> tuple[Kind, ...]:
    """Tolerance kind of each output: norm outputs use OPS.md's f16 norm tolerance."""
    if op in NORM_OPS:
        norm: tuple[Kind, ...] = ("norm", "value")
        return norm[:n]
    kinds: list[Kind] = ["value"] * n
    if op not in ("static_scaled_fp8_quant", "static_scaled_int8_quant", *ACTIVATIONS):
        kinds[-1] = "scales"
    return tuple(kinds)
