"""The native contracts against independent float64 references written from docs/OPS.md."""

from __future__ import annotations

import math

import pytest
import torch

from vllm_xdsl import ops
from vllm_xdsl.ops.tolerance import assert_close_contract

E4M3, E4M3UZ = torch.float8_e4m3fn, torch.float8_e4m3fnuz
FMAX = {E4M3: 448.0, E4M3UZ: 224.0}
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


# --- references (float64, written from the OPS.md table, not from the natives) ----------


def ref_rms(s64: torch.Tensor, w, eps: float, vs: int | None, out_dtype: torch.dtype):
    xv = s64 if vs is None else s64[..., :vs]
    y = s64 / torch.sqrt((xv * xv).mean(-1, keepdim=True) + eps)
    if w is not None:
        y = (y.to(w.dtype).double() * w.double()).to(w.dtype)
    return y.to(out_dtype)


def ref_fp8(v64: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    f = FMAX[dtype]
    return v64.clamp(-f, f).float().to(dtype)


def ref_int8(v64: torch.Tensor) -> torch.Tensor:
    # numpy rounds half to even as well, independently of torch.round.
    return torch.from_numpy(v64.numpy().round()).clamp(-128, 127).to(torch.int8)


# --- rms_norm / fused_add_rms_norm ------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hidden", [(1, 16), (7, 64), (17, 64)])
@pytest.mark.parametrize("with_weight", [True, False])
@pytest.mark.parametrize("eps", [1e-5, 3e-7])
def test_rms_norm(dtype, tokens, hidden, with_weight, eps):
    x = randn(tokens, hidden, dtype=dtype, seed=1)
    w = randn(hidden, dtype=dtype, seed=2) if with_weight else None
    out = ops.rms_norm.native(x, w, eps)
    ref = ref_rms(x.double(), w, eps, None, dtype)
    assert_close_contract(out, ref, kind="norm")


def test_rms_norm_large_and_leading_dims():
    x = randn(2, 3, 5120, dtype=torch.bfloat16, seed=3)
    w = randn(5120, dtype=torch.bfloat16, seed=4)
    out = ops.rms_norm.native(x, w, 1e-6)
    assert out.shape == x.shape and out.dtype == torch.bfloat16
    assert_close_contract(out, ref_rms(x.double(), w, 1e-6, None, torch.bfloat16))


def test_rms_norm_variance_size():
    x = randn(5, 64, seed=5)
    x[:, 32:] *= 100  # the tail must not enter the variance
    out = ops.rms_norm.native(x, None, 1e-6, 32)
    assert_close_contract(out, ref_rms(x.double(), None, 1e-6, 32, torch.float32))
    assert not torch.allclose(out, ops.rms_norm.native(x, None, 1e-6))
    with pytest.raises(ValueError, match="variance_size"):
        ops.rms_norm.native(x, None, 1e-6, 65)


def test_rms_norm_weight_cast_order():
    # bf16 activations, fp32 (Gemma-style) weight: y.to(f32) * w, then one rounding to bf16.
    # Rounding y to bf16 first (a different order) changes many elements.
    x = randn(17, 64, dtype=torch.bfloat16, seed=6)
    w = randn(64, seed=7) + 1.0
    out = ops.rms_norm.native(x, w, 1e-6)
    ref = ref_rms(x.double(), w, 1e-6, None, torch.bfloat16)
    assert (out == ref).float().mean() >= 0.99
    y = x.double() / torch.sqrt((x.double() ** 2).mean(-1, keepdim=True) + 1e-6)
    other_order = (y.to(torch.bfloat16).double() * w.double()).to(torch.bfloat16)
    assert (other_order != out).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_weight", [True, False])
def test_fused_add_rms_norm(dtype, with_weight):
    x = randn(17, 64, dtype=dtype, seed=8)
    r = randn(17, 64, dtype=dtype, seed=9, scale=30.0)
    w = randn(64, dtype=dtype, seed=10) if with_weight else None
    out, res = ops.fused_add_rms_norm.native(x, r, w, 1e-6)
    s64 = x.double() + r.double()
    assert torch.equal(res, s64.to(dtype))
    assert_close_contract(out, ref_rms(s64, w, 1e-6, None, dtype), kind="norm")


def test_fused_add_rms_norm_uses_unrounded_sum():
    x = randn(33, 64, dtype=torch.float16, seed=11)
    r = randn(33, 64, dtype=torch.float16, seed=12, scale=500.0)
    out, res = ops.fused_add_rms_norm.native(x, r, None, 1e-6)
    s64 = x.double() + r.double()
    assert (out == ref_rms(s64, None, 1e-6, None, torch.float16)).float().mean() >= 0.99
    # The rounded sum gives different outputs on this data, so the check above can fail.
    assert (out != ref_rms(res.double(), None, 1e-6, None, torch.float16)).any()


# --- fp8 --------------------------------------------------------------------------------


@pytest.mark.parametrize("fp8", [E4M3, E4M3UZ])
@pytest.mark.parametrize("dtype", DTYPES)
def test_static_fp8(fp8, dtype):
    x = randn(7, 64, dtype=dtype, seed=13, scale=4.0)
    scale = torch.tensor([0.0173])
    q = ops.static_scaled_fp8_quant.native(x, scale, fp8)
    assert_close_contract(q, ref_fp8(x.double() / 0.0173, fp8))


@pytest.mark.parametrize("fp8", [E4M3, E4M3UZ])
def test_fp8_saturation(fp8):
    f = FMAX[fp8]
    x = torch.tensor([[1e4, -1e4, f, -f, f * 0.999, 0.0, 250.0, -239.0]])
    q = ops.static_scaled_fp8_quant.native(x, torch.tensor([1.0]), fp8).float()
    assert q[0, 0] == f and q[0, 1] == -f and q[0, 2] == f and q[0, 3] == -f
    assert q.abs().max() == f  # e4m3fnuz saturates at 224, not torch's 240
    if fp8 == E4M3UZ:
        assert q[0, 6] == 224.0 and q[0, 7] == -224.0


@pytest.mark.parametrize("fp8", [E4M3, E4M3UZ])
def test_dynamic_fp8(fp8):
    x = randn(17, 64, dtype=torch.bfloat16, seed=14, scale=3.0)
    q, s = ops.dynamic_scaled_fp8_quant.native(x, fp8)
    s_ref = max(x.double().abs().max().item() / FMAX[fp8], 1 / (FMAX[fp8] * 512))
    assert s.shape == (1,) and s.dtype == torch.float32
    assert_close_contract(s, torch.tensor([s_ref], dtype=torch.float32), kind="scales")
    assert_close_contract(q, ref_fp8(x.double() / s_ref, fp8))
    assert q.float().abs().max() == FMAX[fp8]  # the absmax element maps to FMAX


@pytest.mark.parametrize("fp8", [E4M3, E4M3UZ])
def test_dynamic_fp8_scale_floor(fp8):
    q, s = ops.dynamic_scaled_fp8_quant.native(torch.zeros(3, 16), fp8)
    assert s.item() == pytest.approx(1 / (FMAX[fp8] * 512), rel=1e-7)
    assert not q.float().any()
    _, s = ops.dynamic_per_token_scaled_fp8_quant.native(torch.zeros(2, 16), None, fp8)
    assert torch.allclose(s, torch.full((2, 1), 1 / (FMAX[fp8] * 512)), rtol=1e-7, atol=0)


@pytest.mark.parametrize("fp8", [E4M3, E4M3UZ])
@pytest.mark.parametrize("with_ub", [False, True])
def test_per_token_fp8(fp8, with_ub):
    x = randn(17, 64, dtype=torch.float16, seed=15, scale=2.0)
    x[3] = 0
    x[5] *= 50
    ub = torch.tensor([20.0]) if with_ub else None
    q, s = ops.dynamic_per_token_scaled_fp8_quant.native(x, ub, fp8)
    a = x.double().abs().amax(-1, keepdim=True)
    if with_ub:
        a = a.clamp(max=20.0)
    s_ref = (a / FMAX[fp8]).clamp(min=1 / (FMAX[fp8] * 512))
    assert s.shape == (17, 1)
    assert_close_contract(s, s_ref.float(), kind="scales")
    assert_close_contract(q, ref_fp8(x.double() / s_ref, fp8))
    if with_ub:  # row 5 is clipped by the upper bound and saturates
        assert s[5].item() == pytest.approx(20.0 / FMAX[fp8])
        assert q[5].float().abs().max() == FMAX[fp8]


def ref_group_scales(x64, gs, eps, fmax, ue8m0):
    a = x64.reshape(x64.shape[0], -1, gs).abs().amax(-1)
    s = a.clamp(min=eps) / fmax
    if ue8m0:
        s = s.float().double().apply_(lambda v: 2.0 ** math.ceil(math.log2(v)))
    return s


@pytest.mark.parametrize("fp8", [E4M3, E4M3UZ])
@pytest.mark.parametrize("gs", [16, 64])
@pytest.mark.parametrize("ue8m0", [False, True])
@pytest.mark.parametrize("column_major", [False, True])
def test_per_token_group_fp8(fp8, gs, ue8m0, column_major):
    x = randn(7, 128, dtype=torch.bfloat16, seed=16, scale=5.0)
    x[2, :gs] = 0  # a zero group: scale eps/FMAX, q 0
    q, s = ops.per_token_group_fp8_quant.native(x, gs, column_major, ue8m0, 1e-10, fp8)
    s_ref = ref_group_scales(x.double(), gs, 1e-10, FMAX[fp8], ue8m0)
    assert s.shape == (7, 128 // gs)
    assert s.stride() == ((1, 7) if column_major else (128 // gs, 1))
    assert_close_contract(s, s_ref.float(), kind="scales")
    if ue8m0:
        assert torch.equal(s.double(), s_ref)  # exact powers of two
    expand = s_ref.repeat_interleave(gs, dim=1)
    assert_close_contract(q, ref_fp8(x.double() / expand, fp8))
    assert not q[2, :gs].float().any()


def test_per_token_group_eps_and_bad_group():
    x = torch.full((1, 16), 1e-12)
    _, s = ops.per_token_group_fp8_quant.native(x, 16, eps=1e-6)
    assert s.item() == pytest.approx(1e-6 / 448.0)
    with pytest.raises(ValueError, match="group_size 48 does not divide hidden size 64"):
        ops.per_token_group_fp8_quant.native(torch.ones(2, 64), 48)


def test_bad_fp8_dtype():
    with pytest.raises(ValueError, match="not an fp8 dtype"):
        ops.static_scaled_fp8_quant.native(torch.ones(2, 4), torch.ones(1), torch.int8)


# --- int8 -------------------------------------------------------------------------------


def test_static_int8_round_half_even_and_saturation():
    x = torch.tensor([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300.0, -300.0, 127.4, -128.6]])
    q = ops.static_scaled_int8_quant.native(x, torch.tensor([1.0]))
    assert q.dtype == torch.int8
    assert q.tolist() == [[0, 2, 2, 0, -2, -2, 127, -128, 127, -128]]


@pytest.mark.parametrize("dtype", DTYPES)
def test_static_int8(dtype):
    x = randn(17, 64, dtype=dtype, seed=17)
    q = ops.static_scaled_int8_quant.native(x, torch.tensor([0.011]))
    assert_close_contract(q, ref_int8(x.double() / torch.tensor(0.011).double()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dynamic_int8(dtype):
    x = randn(7, 64, dtype=dtype, seed=18)
    x[4] = 0
    q, s = ops.dynamic_per_token_scaled_int8_quant.native(x)
    s_ref = x.double().abs().amax(-1, keepdim=True) / 127
    assert s.shape == (7, 1) and s[4].item() == 0
    assert_close_contract(s, s_ref.float(), kind="scales")
    ref = ref_int8(torch.where(s_ref == 0, 0.0, x.double() / s_ref))
    assert_close_contract(q, ref)
    assert not q[4].any() and q.abs().max() == 127


# --- silu_and_mul -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens", [1, 17])
def test_silu_and_mul(dtype, tokens):
    x = randn(tokens, 128, dtype=dtype, seed=19, scale=3.0)
    out = ops.silu_and_mul.native(x)
    a, b = x[:, :64].double(), x[:, 64:].double()
    silu = (a / (1 + torch.exp(-a))).to(dtype).double()  # silu rounded to x's dtype first
    assert out.dtype == dtype and out.shape == (tokens, 64)
    assert_close_contract(out, (silu * b).to(dtype))
    with pytest.raises(ValueError, match="not even"):
        ops.silu_and_mul.native(torch.ones(2, 5))


# The activations in float64 from their definitions (not torch's kernels).
def _ref_activation(name: str, a: torch.Tensor) -> torch.Tensor:
    if name == "silu_and_mul":
        return a / (1 + torch.exp(-a))
    if name == "gelu_and_mul":
        return a * 0.5 * (1 + torch.tensor([math.erf(v / math.sqrt(2)) for v in a.flatten().tolist()],
                                           dtype=torch.float64).reshape(a.shape))
    u = math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)
    return 0.5 * a * (1 + torch.tanh(u))


@pytest.mark.parametrize("op", ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_act_and_mul_halves_and_two_operands(op, dtype):
    native = ops.ALL_OPS[op].native
    x = randn(2, 3, 128, dtype=dtype, seed=23, scale=3.0)  # rank 3
    gate, up = x[..., :64], x[..., 64:]
    ref = (_ref_activation(op, gate.double()).to(dtype).double() * up.double()).to(dtype)
    for out in (native(x), native(gate, up), native(gate.contiguous(), up.contiguous())):
        assert out.dtype == dtype and out.shape == (2, 3, 64)
        assert_close_contract(out, ref)
    with pytest.raises(ValueError, match=f"{op}: last dimension 5 is not even"):
        native(torch.ones(2, 5, dtype=dtype))
    with pytest.raises(ValueError, match=f"{op}: up .* must have the shape and dtype of x"):
        native(gate, up[..., :32])
    with pytest.raises(ValueError, match="shape and dtype"):
        native(gate, up.to(torch.float64))


def test_gelu_variants_differ():
    """gelu (erf) and gelu (tanh) are distinct contracts (not one op with a loose tolerance)."""
    x = randn(4, 256, dtype=torch.float32, seed=29, scale=3.0)
    assert not torch.equal(ops.gelu_and_mul.native(x), ops.gelu_tanh_and_mul.native(x))
