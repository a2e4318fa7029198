"""The tolerances of docs/OPS.md, in one place: implementation vs native, fused vs unfused.

    assert_close_contract(actual, expected)                 # dtype taken from `expected`
    assert_close_contract(out, ref, kind="norm")            # f16 norm outputs: 1e-2 / 2e-3
    assert_close_contract(scales, ref_scales, kind="scales")
    contract_error(actual, expected) -> str | None          # the same check, without raising

fp8 outputs: every element within one fp8 step of the native value at that magnitude, and
at least 99 % of the elements exactly equal. The 99 % is a rate: a caller comparing many
small tensors of one case (verify, over the grid's shapes) checks each with
`exact_rate=False` and applies `fp8_rate_error` to their counts together.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from vllm_xdsl.ops.dtypes import FP8_DTYPES

Kind = Literal["value", "norm", "scales"]

# (atol, rtol) per output dtype (OPS.md "Tolerances").
_TOL: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-5, 1.3e-6),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-3, 1.6e-2),
    torch.int8: (1.0, 0.0),
}
_NORM_F16 = (1e-2, 2e-3)
_SCALES = (1e-6, 1e-5)
FP8_MIN_EXACT = 0.99


def tolerance(dtype: torch.dtype, kind: Kind = "value") -> tuple[float, float]:
    """(atol, rtol) for an output of `dtype`; fp8 has no atol/rtol (see `fp8_step`)."""
    if kind == "scales":
        return _SCALES
    if kind == "norm" and dtype == torch.float16:
        return _NORM_F16
    try:
        return _TOL[dtype]
    except KeyError:
        raise ValueError(f"OPS.md has no tolerance for outputs of dtype {dtype}") from None


def fp8_step(magnitude: Tensor, dtype: torch.dtype) -> Tensor:
    """The spacing of the fp8 grid at each |value| (subnormal spacing below the normals)."""
    fi = torch.finfo(dtype)
    mag = torch.clamp(magnitude.abs().to(torch.float32), min=fi.tiny)
    _, exp = torch.frexp(mag)  # mag = m * 2**exp, m in [0.5, 1)
    return fi.eps * torch.exp2((exp - 1).to(torch.float32))


def max_error(actual: Tensor, expected: Tensor) -> float:
    """Largest absolute difference (as float64); inf if shapes differ."""
    if actual.shape != expected.shape:
        return float("inf")
    if actual.numel() == 0:
        return 0.0
    return (actual.double() - expected.double()).abs().max().item()


def fp8_inexact(actual: Tensor, expected: Tensor) -> int:
    """How many fp8 values of `actual` differ from `expected` (the count the rate is of)."""
    return int((actual.float() != expected.float()).sum())


def fp8_rate_error(wrong: int, total: int) -> str | None:
    """Why `wrong` inexact fp8 values of `total` break the >= 99 % exact rate, or None."""
    allowed = int((1.0 - FP8_MIN_EXACT) * total)
    if wrong > allowed:
        return (f"{wrong} of {total} fp8 values differ by one step "
                f"(at most {allowed} may, >= 99 % must be exact)")
    return None


def contract_error(
    actual: Tensor, expected: Tensor, dtype: torch.dtype | None = None, *, kind: Kind = "value",
    exact_rate: bool = True,
) -> str | None:
    """Why `actual` is not within the OPS.md tolerance of `expected`, or None if it is.
    `exact_rate=False`: fp8 values are held to the one-step bound only (the caller applies
    the 99 % rate, `fp8_rate_error`, to several tensors together)."""
    dtype = expected.dtype if dtype is None else dtype
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    if actual.numel() == 0:
        return None
    if dtype in FP8_DTYPES:
        a, e = actual.float(), expected.float()
        diff = (a - e).abs()
        step = fp8_step(torch.maximum(a.abs(), e.abs()), dtype)
        far = diff > step
        if far.any():
            i = int(torch.nonzero(far.flatten())[0])
            return (f"{int(far.sum())} fp8 values more than one step off "
                    f"(first at flat index {i}: {a.flatten()[i].item()} vs {e.flatten()[i].item()}); "
                    f"max error {diff.max().item():.4g}")
        return fp8_rate_error(fp8_inexact(a, e), a.numel()) if exact_rate else None
    atol, rtol = tolerance(dtype, kind)
    a, e = actual.double(), expected.double()
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    if not torch.equal(nan_a, nan_e):
        return "NaN positions differ"
    a, e = a.masked_fill(nan_a, 0), e.masked_fill(nan_e, 0)
    bad = (a - e).abs() > atol + rtol * e.abs()
    if bad.any():
        i = int(torch.nonzero(bad.flatten())[0])
        return (f"{int(bad.sum())} of {a.numel()} values outside atol={atol} rtol={rtol} "
                f"(first at flat index {i}: {a.flatten()[i].item()} vs {e.flatten()[i].item()}); "
                f"max error {(a - e).abs().max().item():.4g}")
    return None


def assert_close_contract(
    actual: Tensor, expected: Tensor, dtype: torch.dtype | None = None, *, kind: Kind = "value"
) -> None:
    """Raise AssertionError unless `actual` meets OPS.md's tolerance against `expected`."""
    problem = contract_error(actual, expected, dtype, kind=kind)
    if problem is not None:
        raise AssertionError(problem)
