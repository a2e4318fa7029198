"""The generated Triton kernels against the native contracts (docs/OPS.md tolerances).

Without a GPU the kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1, set by helpers/triton_cases.py
before any kernel is created). The grid is reduced to stay fast: tokens {1, 7, 17},
hidden {16, 64}, plus 4096-wide cases; every family, every scheme, both fp8 flavours.
"""

import pytest
import torch
from helpers.triton_cases import (  # before the kernels: it sets up the interpreter
    DEVICE,
    DTYPES,
    E4M3,
    E4M3UZ,
    SCHEME_IDS,
    SCHEMES,
    check,
    randn,
    scale_args,
)

from vllm_xdsl import ops
from vllm_xdsl.backends.triton import functions as F
from vllm_xdsl.backends.triton import launch as L

SHAPES = [(1, 16), (7, 64), (17, 64), (7, 16), (1, 64), (17, 16)]
EPS = (1e-5, 1e-6, 3e-7)


# --- norm family ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hidden", SHAPES)
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm(dtype, tokens, hidden, with_weight):
    eps = EPS[(tokens + hidden) % 3]
    x = randn(tokens, hidden, dtype=dtype, seed=1, scale=3.0)
    w = randn(hidden, dtype=dtype, seed=2) if with_weight else None
    check(F.rms_norm(x, w, eps), ops.rms_norm.native(x, w, eps), ("norm",))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hidden", SHAPES)
@pytest.mark.parametrize("with_weight", [True, False])
def test_fused_add_rms_norm(dtype, tokens, hidden, with_weight):
    eps = EPS[(tokens * hidden) % 3]
    x, r = randn(tokens, hidden, dtype=dtype, seed=3), randn(tokens, hidden, dtype=dtype, seed=4)
    w = randn(hidden, dtype=dtype, seed=5) if with_weight else None
    got = F.fused_add_rms_norm(x, r, w, eps)
    want = ops.fused_add_rms_norm.native(x, r, w, eps)
    check(got, want, ("norm", "value"))
    # residual_out is one rounding of an exact f32 sum: it must be bit exact (the
    # interpreter's f32->bf16 cast truncates; the kernel rounds explicitly).
    assert torch.equal(got[1], want[1])


@pytest.mark.parametrize(
    "dtype,wdtype",
    [
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.bfloat16),
        (torch.float32, torch.bfloat16),
    ],
)
def test_rms_norm_weight_of_other_dtype(dtype, wdtype):
    # y.to(weight.dtype) * weight, then .to(x.dtype): two rounding points.
    x = randn(17, 64, dtype=dtype, seed=6, scale=2.0)
    w = randn(64, dtype=wdtype, seed=7) + 1
    check(F.rms_norm(x, w, 1e-6), ops.rms_norm.native(x, w, 1e-6), ("norm",))


def test_rms_norm_variance_size():
    x = randn(7, 64, dtype=torch.bfloat16, seed=8)
    x[:, 32:] *= 50  # the tail must not enter the variance
    w = randn(64, dtype=torch.bfloat16, seed=9)
    got = F.rms_norm(x, w, 1e-5, 32)
    check(got, ops.rms_norm.native(x, w, 1e-5, 32), ("norm",))
    assert not torch.equal(got, F.rms_norm(x, w, 1e-5))
    with pytest.raises(ValueError, match="variance_size"):
        F.rms_norm(x, w, 1e-5, 65)


@pytest.mark.parametrize("eps", EPS)
def test_baked_epsilon(eps):
    x = randn(7, 64, dtype=torch.float16, seed=10)
    w = randn(64, dtype=torch.float16, seed=11)
    (got,) = L.norm(x, None, w, eps, bake_epsilon=True)
    check(got, ops.rms_norm.native(x, w, eps), ("norm",))
    # A large epsilon must change the result: it is really used, not a default.
    (big,) = L.norm(x, None, w, 10.0, bake_epsilon=True)
    check(big, ops.rms_norm.native(x, w, 10.0), ("norm",))
    assert not torch.allclose(big.float(), got.float())


def test_wide_rows_4096():
    x = randn(3, 4096, dtype=torch.bfloat16, seed=12)
    r = randn(3, 4096, dtype=torch.bfloat16, seed=13)
    w = randn(4096, dtype=torch.bfloat16, seed=14)
    check(F.rms_norm(x, w, 1e-6), ops.rms_norm.native(x, w, 1e-6), ("norm",))
    args = (None, None, E4M3, False, "group", 128)
    check(
        F.fused_add_rms_norm_quant(x, r, w, 1e-6, *args),
        ops.fused_add_rms_norm_quant.native(x, r, w, 1e-6, *args),
        ("value", "value", "scales"),
    )


def test_non_contiguous_rows_and_leading_dims():
    base = randn(7, 96, dtype=torch.bfloat16, seed=15)
    x = base[:, 8:72]  # row stride 96
    rbase = randn(7, 80, dtype=torch.bfloat16, seed=16)
    r = rbase[:, :64]
    w = randn(64, dtype=torch.bfloat16, seed=17)
    assert x.stride(0) == 96 and not x.is_contiguous()
    check(
        F.fused_add_rms_norm(x, r, w, 1e-6),
        ops.fused_add_rms_norm.native(x, r, w, 1e-6),
        ("norm", "value"),
    )
    check(
        F.dynamic_per_token_scaled_fp8_quant(x),
        ops.dynamic_per_token_scaled_fp8_quant.native(x),
        ("value", "scales"),
    )
    check(F.silu_and_mul(base[:, :64]), ops.silu_and_mul.native(base[:, :64]), ("value",))
    x3 = randn(2, 3, 64, dtype=torch.float16, seed=18)
    check(F.rms_norm(x3, None, 1e-6), ops.rms_norm.native(x3, None, 1e-6), ("norm",))
    check(
        F.per_token_group_fp8_quant(x3, 16, True),
        ops.per_token_group_fp8_quant.native(x3, 16, True),
        ("value", "scales"),
    )


# --- quant family -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fp8", [E4M3, E4M3UZ])
@pytest.mark.parametrize("tokens,hidden", [(1, 16), (7, 64), (17, 64)])
def test_fp8_quant_ops(dtype, fp8, tokens, hidden):
    x = randn(tokens, hidden, dtype=dtype, seed=19, scale=4.0)
    scale = torch.tensor([0.02], device=DEVICE)
    check(
        F.static_scaled_fp8_quant(x, scale, fp8),
        ops.static_scaled_fp8_quant.native(x, scale, fp8),
        ("value",),
    )
    check(
        F.dynamic_scaled_fp8_quant(x, fp8),
        ops.dynamic_scaled_fp8_quant.native(x, fp8),
        ("value", "scales"),
    )
    check(
        F.dynamic_per_token_scaled_fp8_quant(x, None, fp8),
        ops.dynamic_per_token_scaled_fp8_quant.native(x, None, fp8),
        ("value", "scales"),
    )
    ub = torch.tensor([1.5], device=DEVICE)
    check(
        F.dynamic_per_token_scaled_fp8_quant(x, ub, fp8),
        ops.dynamic_per_token_scaled_fp8_quant.native(x, ub, fp8),
        ("value", "scales"),
    )
    for col, ue8m0 in [(False, False), (True, False), (False, True), (True, True)]:
        check(
            F.per_token_group_fp8_quant(x, 8, col, ue8m0, 1e-10, fp8),
            ops.per_token_group_fp8_quant.native(x, 8, col, ue8m0, 1e-10, fp8),
            ("value", "scales"),
        )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hidden", [(1, 16), (7, 64), (17, 64)])
def test_int8_quant_ops(dtype, tokens, hidden):
    x = randn(tokens, hidden, dtype=dtype, seed=20, scale=4.0)
    scale = torch.tensor([0.03], device=DEVICE)
    check(
        F.static_scaled_int8_quant(x, scale),
        ops.static_scaled_int8_quant.native(x, scale),
        ("value",),
    )
    check(
        F.dynamic_per_token_scaled_int8_quant(x),
        ops.dynamic_per_token_scaled_int8_quant.native(x),
        ("value", "scales"),
    )


def test_zero_rows():
    x = randn(3, 64, dtype=torch.bfloat16, seed=21)
    x[1] = 0
    check(
        F.dynamic_per_token_scaled_int8_quant(x),
        ops.dynamic_per_token_scaled_int8_quant.native(x),
        ("value", "scales"),
    )
    check(
        F.dynamic_per_token_scaled_fp8_quant(x),
        ops.dynamic_per_token_scaled_fp8_quant.native(x),
        ("value", "scales"),
    )
    z = torch.zeros(2, 64, device=DEVICE)
    check(
        F.dynamic_scaled_fp8_quant(z), ops.dynamic_scaled_fp8_quant.native(z), ("value", "scales")
    )
    check(
        F.per_token_group_fp8_quant(z, 16, False, True),
        ops.per_token_group_fp8_quant.native(z, 16, False, True),
        ("value", "scales"),
    )


# --- silu_and_mul and the fused ops -----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hidden", SHAPES)
def test_silu_and_mul(dtype, tokens, hidden):
    x = randn(tokens, 2 * hidden, dtype=dtype, seed=22, scale=3.0)
    check(F.silu_and_mul(x), ops.silu_and_mul.native(x), ("value",))


@pytest.mark.parametrize("scheme,ub", SCHEMES, ids=SCHEME_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_quant(scheme, ub, dtype):
    tokens, hidden = (7, 64) if dtype != torch.float32 else (17, 16)
    x = randn(tokens, hidden, dtype=dtype, seed=23, scale=2.0)
    w = randn(hidden, dtype=dtype, seed=24) if dtype != torch.float16 else None
    args = (*scale_args(scheme, ub), *scheme)
    check(
        F.rms_norm_quant(x, w, 1e-5, *args),
        ops.rms_norm_quant.native(x, w, 1e-5, *args),
        ("value", "scales"),
    )


@pytest.mark.parametrize("scheme,ub", SCHEMES, ids=SCHEME_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_add_rms_norm_quant(scheme, ub, dtype):
    tokens, hidden = (17, 64) if dtype != torch.bfloat16 else (1, 64)
    x = randn(tokens, hidden, dtype=dtype, seed=25)
    r = randn(tokens, hidden, dtype=dtype, seed=26, scale=2.0)
    w = randn(hidden, dtype=dtype, seed=27) if dtype != torch.float32 else None
    args = (*scale_args(scheme, ub), *scheme)
    check(
        F.fused_add_rms_norm_quant(x, r, w, 3e-7, *args),
        ops.fused_add_rms_norm_quant.native(x, r, w, 3e-7, *args),
        ("value", "value", "scales"),
    )


@pytest.mark.parametrize("scheme,ub", SCHEMES, ids=SCHEME_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_and_mul_quant(scheme, ub, dtype):
    x = randn(7, 128, dtype=dtype, seed=28, scale=3.0)
    args = (*scale_args(scheme, ub), *scheme)
    check(
        F.silu_and_mul_quant(x, *args), ops.silu_and_mul_quant.native(x, *args), ("value", "scales")
    )


def test_static_scale_is_returned_as_f32_copy():
    x = randn(7, 64, dtype=torch.bfloat16, seed=29)
    scale = torch.tensor([0.25], dtype=torch.bfloat16, device=DEVICE)  # bf16 buffers happen
    q, scales = F.rms_norm_quant(x, None, 1e-6, scale, None, E4M3, True, "tensor")
    assert scales.dtype == torch.float32 and scales.shape == (1,)
    assert scales.item() == 0.25 and scales.data_ptr() != scale.data_ptr()
    check(
        q,
        ops.rms_norm_quant.native(x, None, 1e-6, scale, None, E4M3, True, "tensor")[0],
        ("value",),
    )


def test_bad_arguments_raise_one_line_errors():
    x = randn(7, 64, dtype=torch.bfloat16, seed=30)
    for call, match in [
        (lambda: F.rms_norm(x, torch.ones(32, device=DEVICE), 1e-6), "weight of shape"),
        (lambda: F.per_token_group_fp8_quant(x, 48), "does not divide"),
        (lambda: F.silu_and_mul(x[:, :63]), "not even"),
        (
            lambda: F.rms_norm_quant(x, None, 1e-6, None, None, E4M3, False, "tensor"),
            "cannot be fused",
        ),
        (lambda: F.static_scaled_fp8_quant(x, torch.ones(1), torch.int8), "fp8"),
    ]:
        with pytest.raises(ValueError, match=match) as info:
            call()
        assert "\n" not in str(info.value)


# --- column tiles (kernels without a row reduction split wide rows) ----------------------


def test_column_tiles_small(monkeypatch):
    from vllm_xdsl.backends.triton import spec as spec_module

    monkeypatch.setattr(spec_module, "MAX_TILE", 16)  # 64-wide rows: 4 tiles per row
    assert L._spec("silu_and_mul", torch.empty(0, dtype=torch.bfloat16), 64).block_size == 16
    x = randn(7, 128, dtype=torch.bfloat16, seed=31, scale=3.0)
    h = x[:, :64]  # row stride 128
    scale = torch.tensor([0.03], device=DEVICE)
    check(F.silu_and_mul(x), ops.silu_and_mul.native(x), ("value",))
    check(
        F.static_scaled_fp8_quant(h, scale, E4M3UZ),
        ops.static_scaled_fp8_quant.native(h, scale, E4M3UZ),
        ("value",),
    )
    check(
        F.static_scaled_int8_quant(h, scale),
        ops.static_scaled_int8_quant.native(h, scale),
        ("value",),
    )
    for g in (8, 32):  # a group inside a tile, and a group wider than MAX_TILE
        check(
            F.per_token_group_fp8_quant(h, g, True, True),
            ops.per_token_group_fp8_quant.native(h, g, True, True),
            ("value", "scales"),
        )
        args = (None, None, E4M3, False, "group", g)
        check(
            F.silu_and_mul_quant(x, *args),
            ops.silu_and_mul_quant.native(x, *args),
            ("value", "scales"),
        )
    args = (scale, None, torch.int8, True, "tensor")
    check(
        F.silu_and_mul_quant(x, *args), ops.silu_and_mul_quant.native(x, *args), ("value", "scales")
    )


def test_column_tiles_wide_mlp():
    x = randn(2, 2 * 5120, dtype=torch.bfloat16, seed=32)  # 5120 > MAX_TILE: 2 tiles
    args = (None, None, E4M3, False, "group", 128)
    check(
        F.silu_and_mul_quant(x, *args), ops.silu_and_mul_quant.native(x, *args), ("value", "scales")
    )
    check(F.silu_and_mul(x), ops.silu_and_mul.native(x), ("value",))
