"""Whether a device's f32 -> bf16 / e4m3fn conversions round as torch does, checked on it.

With `hw_casts` the kernels leave those roundings to the GPU's conversion instructions
(cvt.rn.bf16x2.f32, cvt.rn.satfinite.e4m3x2.f32: round to nearest even by the PTX
specification, one instruction where the f32 emulation takes 5-10). Before the launcher uses
them on a device by default, it runs two of the real kernels in that form on inputs made of
ties and their neighbours and compares them bit for bit with the native contract on the same
device:

- static_scaled_fp8_quant with scale 1 on f32 values: every e4m3fn value, every midpoint
  between neighbours, one ulp either side, subnormals, signed zeros, values beyond FMAX;
- fused_add_rms_norm's residual_out, (x + residual).to(bf16), on bf16 pairs whose sum is an
  exact tie between two bf16 values or just beside one (by 2**-7 of half a bf16 ulp), or
  a quarter ulp below, at every exponent where x and the residual are both bf16 normals.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from vllm_xdsl import ops
from vllm_xdsl.backends.triton import launch as L
from vllm_xdsl.core.scheme import QuantScheme

_E4M3 = torch.float8_e4m3fn
_checked: dict[torch.device, bool] = {}  # device -> its conversions passed the check


def fp8_probe(fp8: torch.dtype = _E4M3) -> Tensor:
    """[1, N] f32 values whose conversion to `fp8` (after the quant's clamp) decides every
    rounding case: each value, each midpoint, one ulp either side, zeros, beyond FMAX."""
    grid = torch.arange(256, dtype=torch.uint8).view(fp8).float()
    grid = grid[torch.isfinite(grid)].unique()
    mid = (grid[1:] + grid[:-1]) / 2  # exact in f32: e4m3 has 3 mantissa bits
    up = torch.nextafter(mid, torch.full_like(mid, float("inf")))
    down = torch.nextafter(mid, torch.full_like(mid, -float("inf")))
    # FMAX and the tie above it for e4m3fnuz (240, 248) and e4m3fn (448, 464); subnormal ties.
    beyond = torch.tensor([241.0, 248.0, 448.5, 464.0, 480.0, 1e30, float("inf"),
                           2.0**-10, 2.0**-11, 2.0**-12])
    vals = torch.cat([grid, mid, up, down, beyond, -beyond, torch.tensor([0.0, -0.0])])
    return vals.reshape(1, -1)


def bf16_probe() -> tuple[Tensor, Tensor]:
    """[E, 64] bf16 pairs (x, residual) whose f32 sums are bf16 ties or just beside one.

    x = m * 2**e with an even or odd last mantissa bit; residual = half an ulp of x, or that
    times (1 +- 2**-7) or 0.75, so the exact sum is a tie, just beside it or below it."""
    mantissas = torch.tensor([1.0, 1.0078125, 1.5, 1.9921875])  # last bit even, odd, even, odd
    # x and every residual normal (Triton's interpreter reads subnormal bf16 as 0).
    exps = torch.arange(-117, 127, dtype=torch.float32)
    x = mantissas[None, :] * torch.exp2(exps)[:, None]  # [E, 4]
    half_ulp = torch.exp2(exps - 8)[:, None]
    offsets = torch.tensor([1.0, 1.0 + 2.0**-7, 1.0 - 2.0**-7, 0.75])
    r = half_ulp[..., None] * offsets  # [E, 1, 4]
    xs = x[..., None].expand(-1, -1, 4)
    pairs = torch.stack([xs, -xs, xs, -xs], dim=-1)  # signs: +/+, -/-, +/-, -/+
    rs = torch.stack([r, -r, -r, r], dim=-1).expand_as(pairs)
    x16, r16 = pairs.reshape(len(exps), -1), rs.reshape(len(exps), -1)
    return x16.to(torch.bfloat16), r16.to(torch.bfloat16)


def mismatch(device: torch.device, hw: bool) -> str | None:
    """The first difference between the Triton kernels (with or without hardware
    conversions) and the contract on `device`, or None if they agree bit for bit."""
    x = fp8_probe().to(device)
    one = torch.ones(1, device=device)
    with L.hw_casts(hw):  # the launchers of static_scaled_fp8_quant and fused_add_rms_norm
        got = L.quant(x, QuantScheme(_E4M3, True, "tensor"), one)[0]
    want = ops.static_scaled_fp8_quant.native(x, one, _E4M3)
    problem = _first_difference("e4m3fn", x, got.view(torch.uint8), want.view(torch.uint8))
    if problem:
        return problem
    a, b = (t.to(device) for t in bf16_probe())
    with L.hw_casts(hw):
        _, got = L.norm(a, b, None, 1e-6)
    _, want = ops.fused_add_rms_norm.native(a, b, None, 1e-6)
    return _first_difference("bf16", a.float() + b.float(),
                             got.view(torch.int16), want.view(torch.int16))


def _first_difference(what: str, inputs: Tensor, got: Tensor, want: Tensor) -> str | None:
    wrong = (got != want).cpu()
    if not wrong.any():
        return None
    i = int(wrong.flatten().nonzero()[0])
    value = inputs.flatten()[i].item()
    return (f"{int(wrong.sum())} of {wrong.numel()} {what} conversions differ from torch's, "
            f"e.g. {value!r} -> bits {int(got.flatten()[i]):#x}, torch {int(want.flatten()[i]):#x}")


def conversions_checked(device: torch.device) -> bool:
    """Whether `device`'s conversions passed conversion_check (run on first use, once per
    device; a failure warns and keeps the f32 emulation). Not run while a CUDA graph is being
    captured: those launches emulate until the check has run outside one."""
    gpu = device.type == "cuda"
    if gpu and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if device in _checked:
        return _checked[device]
    if gpu and torch.cuda.is_current_stream_capturing():
        return False
    try:
        problem = mismatch(device, hw=True)
    except Exception as e:  # noqa: BLE001 - whatever broke, the emulation is the safe choice
        problem = f"the check failed to run ({type(e).__name__}: {str(e).splitlines()[0]})"
    if problem is not None:
        warnings.warn(f"Triton kernels on {device} keep the f32 rounding emulation: {problem}",
                      RuntimeWarning, stacklevel=2)
    _checked[device] = problem is None
    return _checked[device]


L.set_conversion_check(conversions_checked)  # "auto" asks here (launch cannot import us)
