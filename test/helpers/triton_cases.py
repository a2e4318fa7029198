"""What the Triton kernel tests share: Triton's CPU interpreter where there is no GPU, the
device, the dtypes and quant schemes they sweep, seeded inputs and the contract check.

Importing this sets TRITON_INTERPRET=1 without a GPU before any kernel is created (and
skips the importing module without triton), so a test module imports it first.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

from vllm_xdsl.ops.tolerance import assert_close_contract  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
E4M3, E4M3UZ = torch.float8_e4m3fn, torch.float8_e4m3fnuz


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype).to(DEVICE)


def check(actual, expected, kinds: tuple[str, ...]) -> None:
    """Every output within its OPS.md tolerance, with the native's shape, dtype and strides."""
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected) == len(kinds)
    for a, e, kind in zip(actual, expected, kinds, strict=True):
        assert a.stride() == e.stride(), (a.stride(), e.stride())
        assert_close_contract(a.cpu(), e.cpu(), kind=kind)


# The fused quant schemes: ((q dtype, static, granularity, group size, column major,
# ue8m0), with scale_ub).
SCHEMES = [
    ((E4M3, True, "tensor", 0, False, False), False),
    ((E4M3UZ, True, "tensor", 0, False, False), False),
    ((torch.int8, True, "tensor", 0, False, False), False),
    ((E4M3, False, "token", 0, False, False), False),
    ((E4M3, False, "token", 0, False, False), True),
    ((E4M3UZ, False, "token", 0, False, False), True),
    ((E4M3, False, "group", 16, False, False), False),
    ((E4M3, False, "group", 16, True, True), False),
    ((E4M3UZ, False, "group", 8, True, False), False),
    ((torch.int8, False, "token", 0, False, False), False),
]
SCHEME_IDS = [
    f"{str(s[0]).removeprefix('torch.')}-{'static' if s[1] else 'dyn'}-{s[2]}{s[3] or ''}"
    f"{'-col' if s[4] else ''}{'-ue8m0' if s[5] else ''}{'-ub' if ub else ''}"
    for s, ub in SCHEMES
]


def scale_args(scheme: tuple, ub: bool) -> tuple:
    """(scale, scale_ub) of a fused quant scheme: a static scale, an upper bound."""
    scale = torch.tensor([0.05], device=DEVICE) if scheme[1] else None
    return scale, (torch.tensor([0.8], device=DEVICE) if ub else None)
