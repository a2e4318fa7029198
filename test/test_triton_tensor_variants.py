"""Dynamic per-tensor fp8 quant with a variant's scale fields (scale dtype, floors, range):
the interpreted Triton kernels against the native contract (docs/OPS.md "Variants"), under
OPS.md's tolerances and bit for bit. The absmax kernel reduces the global absmax first; the
quant kernel derives the scale from it once, with the variant's roundings in the native's
order."""

import pytest
import torch
from helpers.triton_cases import (  # before the kernels: it sets up the interpreter
    DEVICE,
    E4M3,
    E4M3UZ,
    check,
    randn,
)

from vllm_xdsl import ops
from vllm_xdsl.backends.triton import functions as F
from vllm_xdsl.backends.triton import register as triton_register
from vllm_xdsl.ops.impl import TensorMeta

BF16 = torch.bfloat16
CT_EPS = torch.finfo(BF16).eps  # compressed-tensors' zero-scale replacement in bf16
CT_TENSOR = f"quotient bf16 scale bf16 zero_eps {CT_EPS}"

# Each scale field alone, then combinations (compressed-tensors' dynamic fp8, with and
# without its zero point, is the last).
VARIANTS = [
    "scale bf16",
    "scale f16",
    "zero_eps 1e-06",  # replaces the default floor: a tiny absmax keeps its tiny scale
    "min_scale",  # the default floor of per-tensor fp8, spelled out
    "range 127.5",
    "range 2000.0",  # wider than FMAX: quotients up to 2000, saturated by the clamp
    "recip scale f16 range 300.0",
    "div min_scale scale bf16",
    CT_TENSOR,
]


def _inputs(dtype: torch.dtype) -> list[torch.Tensor]:
    """Random rows (the absmax in a later program than the first), an all-zero tensor (the
    floors decide), tiny values (absmax / FMAX below the min_scale floor), a 3-d tensor."""
    x = randn(17, 64, dtype=dtype, seed=31, scale=3.0)
    x[11, 5] = 40.0
    tiny = randn(7, 64, dtype=dtype, seed=32, scale=1e-4)
    return [x, torch.zeros(5, 64, dtype=dtype, device=DEVICE), tiny,
            randn(2, 5, 64, dtype=dtype, seed=33, scale=2.0)]


def _check_bitwise(got: tuple, want: tuple) -> None:
    check(got, want, ("value", "scales"))  # OPS.md tolerances, shapes and strides
    assert got[1].dtype == want[1].dtype
    assert torch.equal(got[0].cpu().view(torch.uint8), want[0].cpu().view(torch.uint8))
    assert torch.equal(got[1].cpu().float(), want[1].cpu().float()), (got[1], want[1])


@pytest.mark.parametrize("dtype", [torch.float16, BF16, torch.float32])
@pytest.mark.parametrize("variant", VARIANTS)
def test_dynamic_per_tensor_scale_variants(variant: str, dtype: torch.dtype) -> None:
    for fp8 in (E4M3, E4M3UZ):
        for x in _inputs(dtype):
            got = F.dynamic_scaled_fp8_quant(x, fp8, None, variant)
            want = ops.dynamic_scaled_fp8_quant.native(x, fp8, None, variant)
            _check_bitwise(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, BF16, torch.float32])
def test_compressed_tensors_per_tensor_with_a_zero_point(dtype: torch.dtype) -> None:
    zp = torch.tensor([2.0], dtype=BF16, device=DEVICE)
    for x in _inputs(dtype):
        got = F.dynamic_scaled_fp8_quant(x, E4M3, zp, CT_TENSOR)
        want = ops.dynamic_scaled_fp8_quant.native(x, E4M3, zp, CT_TENSOR)
        _check_bitwise(got, want)


def test_the_variant_is_not_cosmetic() -> None:
    """Each field changes the native's result on these inputs, so the tests above see it."""
    x = _inputs(BF16)
    for variant in ("scale bf16", "zero_eps 1e-06", "range 127.5", CT_TENSOR):
        assert any(not torch.equal(ops.dynamic_scaled_fp8_quant.native(xi, E4M3, None,
                                                                       variant)[1].float(),
                                   ops.dynamic_scaled_fp8_quant.native(xi, E4M3)[1])
                   for xi in x), variant


def test_many_programs_and_an_empty_tensor() -> None:
    """257 rows: the global absmax comes from another program than the scale's store.
    No rows: the scale of an absmax of 0, as the native gives for a zero tensor."""
    x = randn(257, 64, dtype=BF16, seed=34, scale=3.0)
    x[200, 3] = -50.0
    _check_bitwise(F.dynamic_scaled_fp8_quant(x, E4M3, None, CT_TENSOR),
                   ops.dynamic_scaled_fp8_quant.native(x, E4M3, None, CT_TENSOR))
    for variant in ("zero_eps 1e-06", CT_TENSOR, "range 127.5"):
        q, s = F.dynamic_scaled_fp8_quant(torch.zeros(0, 64, dtype=BF16, device=DEVICE), E4M3,
                                          None, variant)
        _, want = ops.dynamic_scaled_fp8_quant.native(
            torch.zeros(1, 64, dtype=BF16, device=DEVICE), E4M3, None, variant)
        assert q.shape == (0, 64) and s.dtype == want.dtype
        assert torch.equal(s.cpu().float(), want.cpu().float()), (variant, s, want)


def test_supports_args_takes_per_tensor_scale_variants() -> None:
    meta = {"x": TensorMeta(BF16, (7, 64), "cpu"), "fp8_dtype": E4M3}
    for variant in VARIANTS:
        assert triton_register.supports_args("dynamic_scaled_fp8_quant", **meta,
                                             zero_point=None, variant=variant) is True
    zp = TensorMeta(BF16, (1,), "cpu")
    assert triton_register.supports_args("dynamic_scaled_fp8_quant", **meta, zero_point=zp,
                                         variant=CT_TENSOR) is True
