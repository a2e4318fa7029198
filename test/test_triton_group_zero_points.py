"""Per-group quants with a zero point per group ([..., G], compressed-tensors' FP8_BLOCK
activations): the interpreted Triton kernels against the native contract (docs/OPS.md
"Variants": the zero point rounded to the quotient dtype, added to the rounded quotient,
the sum rounded again), under OPS.md's tolerances and bit for bit; unfused, fused with a
norm (plain and with the add) and with an act-and-mul."""

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
from vllm_xdsl.ops import fused as native_fused
from vllm_xdsl.ops.impl import TensorMeta

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
CT_EPS = torch.finfo(BF16).eps  # compressed-tensors' zero-scale replacement in bf16
CT_BLOCK = f"quotient bf16 scale bf16 zero_eps {CT_EPS}"  # FP8_BLOCK's activation variant
GROUP_OPS = ("rms_norm_quant", "fused_add_rms_norm_quant", "silu_and_mul_quant")


def _zero_points(shape: tuple[int, ...], group_size: int, dtype: torch.dtype = BF16,
                 seed: int = 40) -> torch.Tensor:
    """One zero point per group, distinct from group to group (and not all integers, so a
    zero point read from the wrong group or rounded otherwise changes q)."""
    g = torch.Generator().manual_seed(seed)
    zp = torch.randn(*shape[:-1], shape[-1] // group_size, generator=g) * 20
    return zp.to(dtype).to(DEVICE)


def _bitwise(got: tuple, want: tuple, kinds: tuple[str, ...]) -> None:
    """Within OPS.md's tolerances (shapes, dtypes, strides), then bit for bit."""
    check(got, want, kinds)
    for a, e in zip(got, want, strict=True):
        assert a.dtype == e.dtype
        if a.dtype in (E4M3, E4M3UZ):
            a, e = a.view(torch.uint8), e.view(torch.uint8)
        assert torch.equal(a.cpu(), e.cpu()), (a.float() - e.float()).abs().max()


SHAPES = [(7, 256), (2, 5, 256)]  # 2-d and 3-d x


@pytest.mark.parametrize("dtype", [F16, BF16, F32])
@pytest.mark.parametrize("shape", SHAPES, ids=["2d", "3d"])
@pytest.mark.parametrize("group_size", [256, 128, 32])  # 1, 2 and 8 groups a row
def test_unfused_compressed_tensors_fp8_block(dtype: torch.dtype, shape: tuple[int, ...],
                                              group_size: int) -> None:
    x = randn(*shape, dtype=dtype, seed=41, scale=3.0)
    x[..., 0, :group_size] = 0  # a zero group: zero_eps decides its scale
    zp = _zero_points(shape, group_size)
    for column_major in (False, True):
        args = (x, group_size, column_major, False, 1e-10, E4M3, zp, CT_BLOCK)
        _bitwise(F.per_token_group_fp8_quant(*args),
                 ops.per_token_group_fp8_quant.native(*args), ("value", "scales"))


@pytest.mark.parametrize("variant", ["", "min_scale", "recip quotient bf16", "quotient f16"])
@pytest.mark.parametrize("zp_dtype", [F32, BF16, torch.int8])
def test_unfused_other_variants_and_zero_point_dtypes(variant: str, zp_dtype: torch.dtype
                                                      ) -> None:
    """The quotient dtype rounds the zero point and the sum (f32: neither); any zero point
    dtype is read as the native reads it; both fp8 flavours; ue8m0 scales."""
    x = randn(17, 128, dtype=BF16, seed=42, scale=2.0)
    zp = _zero_points((17, 128), 32, F32, seed=43)
    zp = zp.round().clamp(-100, 100).to(zp_dtype) if zp_dtype == torch.int8 else zp.to(zp_dtype)
    for fp8 in (E4M3, E4M3UZ):
        for ue8m0 in (False, True):
            args = (x, 32, False, ue8m0, 1e-10, fp8, zp, variant)
            _bitwise(F.per_token_group_fp8_quant(*args),
                     ops.per_token_group_fp8_quant.native(*args), ("value", "scales"))


def test_wide_rows_take_the_zero_points_of_their_column_tile() -> None:
    """8192 columns are two column tiles (spec.MAX_TILE): each tile's groups read their own
    zero points."""
    x = randn(3, 8192, dtype=BF16, seed=44, scale=3.0)
    zp = _zero_points((3, 8192), 128, seed=45)
    args = (x, 128, False, False, 1e-10, E4M3, zp, CT_BLOCK)
    _bitwise(F.per_token_group_fp8_quant(*args), ops.per_token_group_fp8_quant.native(*args),
             ("value", "scales"))


def test_one_value_and_one_per_row_on_a_group_scheme() -> None:
    """The native broadcasts a zero point of one value ([1]) or one per row ([..., 1]) over
    every group; so do the kernels."""
    x = randn(2, 5, 128, dtype=F16, seed=46, scale=3.0)
    for zp in (torch.tensor([3.5], dtype=BF16, device=DEVICE),
               _zero_points((2, 5, 128), 128, seed=47)):
        args = (x, 32, True, False, 1e-10, E4M3, zp, CT_BLOCK)
        _bitwise(F.per_token_group_fp8_quant(*args),
                 ops.per_token_group_fp8_quant.native(*args), ("value", "scales"))


def _fused(op: str, x: torch.Tensor, group_size: int, zp: torch.Tensor, variant: str,
           r: torch.Tensor | None, w: torch.Tensor | None) -> tuple[tuple, tuple, tuple]:
    """(triton, native, kinds) of one fused op with a dynamic per-group fp8 quant."""
    q = (None, None, E4M3, False, "group", group_size, False, False, 1e-10, zp, variant)
    if op == "rms_norm_quant":
        return (F.rms_norm_quant(x, w, 1e-6, *q), native_fused.rms_norm_quant(x, w, 1e-6, *q),
                ("value", "scales"))
    if op == "fused_add_rms_norm_quant":
        assert r is not None
        return (F.fused_add_rms_norm_quant(x, r, w, 1e-6, *q),
                native_fused.fused_add_rms_norm_quant(x, r, w, 1e-6, *q),
                ("value", "value", "scales"))
    return (F.silu_and_mul_quant(x, *q, up=r), native_fused.silu_and_mul_quant(x, *q, up=r),
            ("value", "scales"))


@pytest.mark.parametrize("dtype", [F16, BF16, F32])
@pytest.mark.parametrize("shape", SHAPES, ids=["2d", "3d"])
@pytest.mark.parametrize("op", GROUP_OPS)
def test_fused_compressed_tensors_fp8_block(op: str, shape: tuple[int, ...],
                                            dtype: torch.dtype) -> None:
    """A norm (weighted, plain and with the add) or SiLU-and-mul, then FP8_BLOCK's quant with
    a zero point per group: 1 group and 4 or 8 groups (32) a row. In f32 the kernel's norm
    or activation may differ from torch's by an ulp (OPS.md), and the scale with it: there
    only the tolerances are checked."""
    x = randn(*shape, dtype=dtype, seed=48, scale=3.0)
    r = randn(*shape, dtype=dtype, seed=49)
    w = randn(shape[-1], dtype=dtype, seed=50)
    out = shape[-1] // 2 if op == "silu_and_mul_quant" else shape[-1]
    r_or_none = r if op == "fused_add_rms_norm_quant" else None  # x = [gate | up] first
    for group_size in (out, 32):
        zp = _zero_points((*shape[:-1], out), group_size, seed=51)
        for variant in (CT_BLOCK, "recip quotient f16"):
            got, want, kinds = _fused(op, x, group_size, zp, variant, r_or_none, w)
            check(got, want, kinds) if dtype == F32 else _bitwise(got, want, kinds)
    if op != "rms_norm_quant":  # without a weight / with a separate up operand
        zp = _zero_points(shape, 32, seed=52)
        got, want, kinds = _fused(op, x, 32, zp, CT_BLOCK, r, None)
        check(got, want, kinds) if dtype == F32 else _bitwise(got, want, kinds)


def test_the_zero_point_is_not_cosmetic() -> None:
    """The per-group zero points change the native's q (so the tests above see them), and a
    zero point of another group's value changes it too."""
    x = randn(7, 256, dtype=BF16, seed=41, scale=3.0)
    zp = _zero_points((7, 256), 32)
    q = ops.per_token_group_fp8_quant.native(x, 32, False, False, 1e-10, E4M3, zp, CT_BLOCK)[0]
    plain = ops.per_token_group_fp8_quant.native(x, 32, False, False, 1e-10, E4M3, None,
                                                 CT_BLOCK)[0]
    rolled = ops.per_token_group_fp8_quant.native(x, 32, False, False, 1e-10, E4M3,
                                                  zp.roll(1, -1), CT_BLOCK)[0]
    assert not torch.equal(q.view(torch.uint8), plain.view(torch.uint8))
    assert not torch.equal(q.view(torch.uint8), rolled.view(torch.uint8))


def test_a_zero_point_of_another_shape_is_a_clear_error() -> None:
    x = randn(7, 128, dtype=BF16, seed=53)
    for shape in ((7, 3), (7,), (6, 4)):
        zp = torch.zeros(shape, dtype=BF16, device=DEVICE)
        with pytest.raises(ValueError, match=r"per_token_group_fp8_quant: zero_point of shape"):
            F.per_token_group_fp8_quant(x, 32, False, False, 1e-10, E4M3, zp, CT_BLOCK)


def test_supports_args_takes_a_zero_point_per_group() -> None:
    x = TensorMeta(BF16, (7, 64), "cpu")
    group = {"group_size": 32, "column_major_scales": False, "use_ue8m0": False, "eps": 1e-10}
    assert triton_register.supports_args(
        "per_token_group_fp8_quant", x=x, fp8_dtype=E4M3, **group,
        zero_point=TensorMeta(BF16, (7, 2), "cpu"), variant=CT_BLOCK) is True
    assert triton_register.supports_args(
        "rms_norm_quant", x=x, weight=None, epsilon=1e-6, scale=None, scale_ub=None,
        quant_dtype=E4M3, static=False, granularity="group", group_size=32,
        column_major_scales=False, use_ue8m0=False, group_eps=1e-10,
        zero_point=TensorMeta(BF16, (None, 2), "cpu"), variant=CT_BLOCK) is True
