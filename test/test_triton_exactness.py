"""Bitwise exactness of the Triton kernels' roundings and divisions against torch, and
NaN / inf inputs giving what the native contract gives (in Triton's interpreter without a
GPU; on an NVIDIA sm_89+ GPU also with the GPU's own conversions)."""

import pytest
import torch
from helpers.triton_cases import (  # before the kernels: it sets up the interpreter
    DEVICE,
    E4M3,
    E4M3UZ,
    randn,
)

from vllm_xdsl import ops
from vllm_xdsl.backends.triton import conversion_check as C
from vllm_xdsl.backends.triton import functions as F
from vllm_xdsl.backends.triton import launch as L

# The exactness tests also run with the GPU's own bf16 / e4m3fn conversions where a GPU has
# them (launch.hw_casts: the default there once conversion_check has passed on the device).
HW_CASTS = [False, pytest.param(True, id="hw_casts", marks=pytest.mark.skipif(
    DEVICE == "cpu" or not L.converts_exactly(torch.device(DEVICE)),
    reason="needs an NVIDIA sm_89+ GPU"))]


@pytest.mark.parametrize("hw", HW_CASTS)
@pytest.mark.parametrize("fp8", [E4M3, E4M3UZ])
def test_fp8_rounding_is_exact(fp8, hw):
    # Every fp8 value, every midpoint between neighbours (ties to even), points just off
    # the midpoints, subnormals and values beyond FMAX: the kernel must equal torch's cast
    # exactly (the interpreter's own f32->fp8 cast gets 2.8 % of random values wrong).
    g = torch.Generator().manual_seed(40)
    vals = torch.cat([C.fp8_probe(fp8).flatten(), torch.tensor([-1e9, 230.0]),
                      torch.randn(4000, generator=g) * 100, torch.randn(1000, generator=g) * 1e-2])
    x = vals.to(DEVICE).reshape(1, -1)
    one = torch.ones(1, device=DEVICE)
    with L.hw_casts(hw):
        got = F.static_scaled_fp8_quant(x, one, fp8)
    want = ops.static_scaled_fp8_quant.native(x, one, fp8)
    # Bitwise: values, and the sign of zero (e4m3fn has -0, e4m3fnuz does not).
    assert torch.equal(got.cpu().view(torch.uint8), want.cpu().view(torch.uint8))


@pytest.mark.parametrize("hw", HW_CASTS)
def test_bf16_rounding_is_exact(hw):
    # residual_out = (x + residual).to(bf16) is bitwise comparable; sums of bf16 values of
    # different magnitudes often land exactly between two bf16 values (ties to even).
    g = torch.Generator().manual_seed(41)
    x = (torch.randn(8, 4096, generator=g) * 2.0 ** torch.randint(-8, 9, (8, 4096), generator=g))
    r = torch.randn(8, 4096, generator=g)
    x, r = x.to(torch.bfloat16).to(DEVICE), r.to(torch.bfloat16).to(DEVICE)
    with L.hw_casts(hw):
        _, got = F.fused_add_rms_norm(x, r, None, 1e-6)
    _, want = ops.fused_add_rms_norm.native(x, r, None, 1e-6)
    assert torch.equal(got.cpu().view(torch.int16), want.cpu().view(torch.int16))


def _midpoint_rows(exps: list[int], qmax: float, seed: int) -> torch.Tensor:
    """Rows of 16 groups of 16 f32 values, each group led by its absmax qmax * s, so that
    the row's and every group's scale is s (12 significant bits, times 2**exp); the other
    values are s times midpoints between fp8 values (or int8 halves): exact ties, and
    1-2 ulps either side. Where a quotient is a tie or next to one, a quotient one ulp
    off (a reciprocal multiply) changes q."""
    g = torch.Generator().manual_seed(seed)
    grid = torch.arange(256, dtype=torch.uint8).view(E4M3).double()
    grid = grid[torch.isfinite(grid)].unique()
    mids = torch.cat([(grid[1:] + grid[:-1]) / 2, torch.arange(-127, 128).double() + 0.5])
    mids = mids[mids.abs() < qmax]
    s = (2048 + torch.randint(2048, (len(exps), 1), generator=g)).double() / 2048
    s = s * 2.0 ** torch.tensor(exps, dtype=torch.float64).reshape(-1, 1)
    v = (mids[torch.randint(len(mids), (len(exps), 16, 16), generator=g)] * s[..., None])
    v = v.float()  # exact: 5-9 significant bits times 12
    step = torch.randint(-2, 3, v.shape, generator=g)
    step[..., :8] = 0  # half the values exact ties
    for _ in range(2):
        v = torch.where(step > 0, torch.nextafter(v, torch.full_like(v, float("inf"))), v)
        v = torch.where(step < 0, torch.nextafter(v, torch.full_like(v, -float("inf"))), v)
        step = step - step.sign()
    v[..., 0] = (qmax * s).float()  # each group's absmax
    v[..., 1], v[..., 2] = -0.0, -(2.0**-30 * s).float()  # torch keeps these -0 in e4m3fn
    return v.reshape(len(exps), 256).to(DEVICE)


@pytest.mark.parametrize("hw", HW_CASTS)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # 1e-30 scales
def test_quant_divisions_are_exact(hw):
    # The per-token, per-group and int8 quants divide a row (group) by its scale with one
    # IEEE division per row plus fma corrections (_div_rn_by), bitwise as torch divides.
    # Scales from 2**-40 to 2**40, and beyond the fast path's range: a huge amax, tiny int8
    # scales, a tiny static scale with overflowing quotients, a scale_ub below the amax.
    exps = [-40, -17, -3, 0, 1, 9, 23, 40, 70]
    fp8_rows, int8_rows = _midpoint_rows(exps, 448.0, 31), _midpoint_rows(exps, 127.0, 32)
    s = int8_rows[:, :1].cpu() / 127  # the int8 rows' scales, exactly
    cases = [
        ("dynamic_per_token_scaled_fp8_quant", (fp8_rows,)),
        ("dynamic_per_token_scaled_fp8_quant", (fp8_rows, torch.tensor([300.0], device=DEVICE))),
        ("per_token_group_fp8_quant", (fp8_rows, 16)),
        ("per_token_group_fp8_quant", (fp8_rows, 16, True, True)),
        ("dynamic_per_token_scaled_int8_quant", (int8_rows,)),
        ("dynamic_per_token_scaled_int8_quant", (int8_rows * 2.0**-100,)),  # below 2**-64
        ("static_scaled_int8_quant", (int8_rows[3:4], s[3].to(DEVICE))),
        ("static_scaled_int8_quant", (int8_rows[5:6], s[5].to(DEVICE))),
        ("static_scaled_int8_quant", (int8_rows, torch.tensor([1e-30], device=DEVICE))),
        ("static_scaled_int8_quant", (int8_rows, torch.tensor([2.0**30], device=DEVICE))),
    ]
    for name, args in cases:
        with L.hw_casts(hw):
            got = getattr(F, name)(*args)
        want = getattr(ops, name).native(*args)
        for a, b in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,), strict=True):
            bits = torch.uint8 if a.dtype in (E4M3, torch.int8) else a.dtype
            assert torch.equal(a.cpu().view(bits), b.cpu().view(bits)), name


def test_int8_rounds_half_to_even():
    x = torch.tensor(
        [[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, -128.5, 300.0, 3.49]], device=DEVICE
    )
    got = F.static_scaled_int8_quant(x, torch.ones(1, device=DEVICE))
    assert got.cpu().tolist() == [[0, 2, 2, 0, -2, -2, 126, 127, -128, 127, 3]]


def _same_or_both_nan(got: torch.Tensor, want: torch.Tensor) -> bool:
    g, w = got.cpu().float(), want.cpu().float()  # fp8 and int8 convert exactly
    nan = torch.isnan(w)
    return torch.equal(torch.isnan(g), nan) and torch.equal(g[~nan], w[~nan])


@pytest.mark.parametrize("hw", HW_CASTS)
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # NaN in numpy
@pytest.mark.filterwarnings("ignore:All-NaN slice encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_nan_and_inf_inputs_give_what_the_contract_gives(hw):
    # A NaN (or an inf that makes one) gives NaN values and scales as torch computes them,
    # never finite ones: GPU max/min/max-reductions drop NaN unless told to keep it, and a
    # NaN has no e4m3 encoding of its own. Rows: NaN, +inf, -inf, and one of plain values.
    x = randn(4, 64, dtype=torch.bfloat16, seed=42, scale=2.0)
    x[0, 5], x[1, 9], x[2, 33] = float("nan"), float("inf"), -float("inf")
    w = randn(64, dtype=torch.bfloat16, seed=43)
    s, ub = torch.tensor([0.05], device=DEVICE), torch.tensor([0.8], device=DEVICE)
    cases = [(f"{name}-{str(fp8).removeprefix('torch.')}", name, args)
             for fp8 in (E4M3, E4M3UZ) for name, args in [
        ("static_scaled_fp8_quant", (x, s, fp8)),
        ("dynamic_scaled_fp8_quant", (x, fp8)),
        ("dynamic_per_token_scaled_fp8_quant", (x, None, fp8)),
        ("dynamic_per_token_scaled_fp8_quant", (x, ub, fp8)),
        ("per_token_group_fp8_quant", (x, 16, False, False, 1e-10, fp8)),
        ("per_token_group_fp8_quant", (x, 16, True, True, 1e-10, fp8)),
        ("rms_norm_quant", (x, w, 1e-6, s, None, fp8, True, "tensor")),
        ("rms_norm_quant", (x, w, 1e-6, None, None, fp8, False, "token")),
        ("rms_norm_quant", (x, w, 1e-6, None, None, fp8, False, "group", 16)),
        ("silu_and_mul_quant", (x, s, None, fp8, True, "tensor")),
    ]]
    cases += [(name, name, args) for name, args in [
        ("static_scaled_int8_quant", (x, s)),
        ("dynamic_per_token_scaled_int8_quant", (x,)),
    ]]
    wrong = []
    for label, name, args in cases:
        with L.hw_casts(hw):
            got = getattr(F, name)(*args)
        want = getattr(ops, name).native(*args)
        pairs = zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True)
        wrong += [f"{label} output {i}" for i, (a, b) in enumerate(pairs)
                  if not _same_or_both_nan(a, b)]
    assert not wrong, wrong
