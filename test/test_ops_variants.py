"""Quant variants (docs/OPS.md "Variants"): each variant's native against the source form it
describes, written out here as that source computes it (compressed-tensors' fake quant, vLLM's
QuantFP8.forward_native), bit for bit; the default variant is the OPS.md contract; the native
lowering equals the native; the kernels of the default numerics reject variants."""

from __future__ import annotations

import pytest
import torch
from helpers.evaluate import evaluate
from xdsl.dialects import func
from xdsl.parser import Parser

from vllm_xdsl import ops
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.core.variant import DEFAULT_VARIANT, parse_variant
from vllm_xdsl.dialects import make_context
from vllm_xdsl.ops import natives as N
from vllm_xdsl.ops.impl import TensorMeta
from vllm_xdsl.ops.natives_variant import quantize_variant
from vllm_xdsl.transforms.lowering.lower_dispatch import lower_dispatch

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
E4M3 = torch.float8_e4m3fn
CT_EPS = torch.finfo(BF16).eps  # compressed-tensors' zero-scale replacement in bf16


def _x(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3).to(dtype)
    x[..., 0, :] = 0  # a zero row: the scale floors matter
    return x


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    assert torch.equal(a.float(), b.float()), (a.float() - b.float()).abs().max()


# --- the source forms, as written in compressed-tensors 0.20 and vLLM ----------------------


def ct_fake_quant_q(x, scale, zp, qmin, qmax, is_int):  # noqa: ANN001, ANN201
    """compressed-tensors _quantize_dequantize up to the rounding: the quantized values."""
    scaled = x / scale
    scaled = scaled + zp.to(x.dtype)
    clamped = torch.clamp(scaled, qmin, qmax)
    return torch.round(clamped) if is_int else clamped.to(E4M3)


def ct_dynamic_token_scale(x, qrange):  # noqa: ANN001, ANN201
    """calculate_qparams (symmetric) on amin/amax over the last dim, in x's dtype."""
    mn = torch.min(x.amin(dim=-1, keepdim=True), torch.zeros(1, dtype=x.dtype))
    mx = torch.max(x.amax(dim=-1, keepdim=True), torch.zeros(1, dtype=x.dtype))
    scales = torch.max(mn.abs(), mx.abs()) / (torch.tensor(qrange).to(x.dtype) / 2)
    return torch.where(scales == 0, torch.tensor(CT_EPS, dtype=scales.dtype), scales)


@pytest.mark.parametrize("shape", [(7, 64), (2, 5, 64)])
def test_ct_static_fp8(shape: tuple[int, ...]) -> None:
    x = _x(shape, BF16)
    scale = torch.tensor([0.0123], dtype=BF16)
    zp = torch.tensor([0.0], dtype=E4M3)
    ref = ct_fake_quant_q(x, scale, zp, torch.tensor(-448.0), torch.tensor(448.0), False)
    q = N.static_scaled_fp8_quant(x, scale, E4M3, zp.to(BF16), "div quotient bf16")
    _same(q, ref)
    # The contract (f32 reciprocal, no bf16 quotient) differs: the variant is not cosmetic.
    assert not torch.equal(N.static_scaled_fp8_quant(x, scale).float(), ref.float())


def test_ct_static_int8_with_a_zero_point() -> None:
    x = _x((9, 64), BF16)
    scale = torch.tensor([0.02], dtype=BF16)
    zp = torch.tensor([3], dtype=torch.int8)
    ref = ct_fake_quant_q(x, scale, zp, torch.tensor(-128.0), torch.tensor(127.0), True)
    q = N.static_scaled_int8_quant(x, scale, zp.to(BF16), "quotient bf16")
    _same(q.to(BF16), ref)


@pytest.mark.parametrize("shape", [(7, 64), (2, 5, 64)])
def test_ct_dynamic_per_token_fp8(shape: tuple[int, ...]) -> None:
    x = _x(shape, BF16)
    scale = ct_dynamic_token_scale(x, 896.0)
    zp = torch.zeros(scale.shape, dtype=E4M3)
    ref = ct_fake_quant_q(x, scale, zp, torch.tensor(-448.0), torch.tensor(448.0), False)
    variant = f"quotient bf16 scale bf16 zero_eps {CT_EPS}"
    q, s = N.dynamic_per_token_scaled_fp8_quant(x, None, E4M3, zp.to(BF16), variant)
    _same(q, ref)
    _same(s, scale.reshape(-1, 1))


def test_ct_dynamic_per_token_int8() -> None:
    x = _x((2, 5, 64), BF16)
    scale = ct_dynamic_token_scale(x, 255.0)
    zp = torch.zeros(scale.shape, dtype=torch.int8)
    ref = ct_fake_quant_q(x, scale, zp, torch.tensor(-128.0), torch.tensor(127.0), True)
    variant = f"quotient bf16 scale bf16 zero_eps {CT_EPS} range 127.5"
    q, s = N.dynamic_per_token_scaled_int8_quant(x, zp.to(BF16), variant)
    _same(q.to(BF16), ref)
    _same(s, scale.reshape(-1, 1))


def ct_dynamic_group_scale(xg, qrange):  # noqa: ANN001, ANN201
    """compute_dynamic_scales_and_zp for GROUP: amin/amax of x.unflatten(-1, (G, gs)) over
    the last dim without keepdim, then calculate_qparams (symmetric), in x's dtype: [..., G]."""
    mn = torch.min(xg.amin(dim=-1), torch.zeros(1, dtype=xg.dtype))
    mx = torch.max(xg.amax(dim=-1), torch.zeros(1, dtype=xg.dtype))
    scales = torch.max(mn.abs(), mx.abs()) / (torch.tensor(qrange).to(xg.dtype) / 2)
    return torch.where(scales == 0, torch.tensor(CT_EPS, dtype=scales.dtype), scales)


@pytest.mark.parametrize("shape", [(7, 64), (2, 5, 64)])
def test_ct_dynamic_per_group_fp8(shape: tuple[int, ...]) -> None:
    """FP8_BLOCK's activations: groups of gs, bf16 scales, a zero point per group
    ([..., G], compressed-tensors' `scale.unsqueeze(-1)` and `zp.unsqueeze(-1)`)."""
    x, gs = _x(shape, BF16), 16
    x[..., 1, :gs] = 0  # a zero group in a row that is not zero
    xg = x.unflatten(-1, (64 // gs, gs))
    scale = ct_dynamic_group_scale(xg, 896.0)
    zp = torch.zeros(scale.shape, dtype=E4M3)
    ref = ct_fake_quant_q(xg, scale.unsqueeze(-1), zp.unsqueeze(-1), torch.tensor(-448.0),
                          torch.tensor(448.0), False).flatten(-2)
    variant = f"quotient bf16 scale bf16 zero_eps {CT_EPS}"
    q, s = N.per_token_group_fp8_quant(x, gs, False, False, 1e-10, E4M3, zp.to(BF16), variant)
    _same(q, ref)
    _same(s, scale.reshape(-1, 64 // gs))
    # A zero point that is not 0 is added per group, not per token or per column.
    zk = (torch.randn(scale.shape, generator=torch.Generator().manual_seed(3)) * 4).round()
    ref = ct_fake_quant_q(xg, scale.unsqueeze(-1), zk.to(BF16).unsqueeze(-1),
                          torch.tensor(-448.0), torch.tensor(448.0), False).flatten(-2)
    _same(N.per_token_group_fp8_quant(x, gs, False, False, 1e-10, E4M3, zk.to(BF16),
                                      variant)[0], ref)


@pytest.mark.parametrize("with_ub", [False, True])
@pytest.mark.parametrize("shape", [(7, 64), (2, 5, 64)])
def test_vllm_quant_fp8_per_token(shape: tuple[int, ...], with_ub: bool) -> None:
    x = _x(shape, BF16)
    ub = torch.tensor([2.5]) if with_ub else None
    x_max, _ = x.abs().max(dim=-1)
    x_max = x_max.unsqueeze(-1).to(F32)
    if ub is not None:
        x_max = x_max.clamp(max=ub)
    scale = (x_max / 448.0).clamp(min=1.0 / (448.0 * 512.0))
    ref = (x.to(F32) * scale.to(F32).reciprocal()).clamp(-448.0, 448.0).to(E4M3)
    q, s = N.dynamic_per_token_scaled_fp8_quant(x, ub, E4M3, None, "recip")
    _same(q, ref)
    _same(s, scale.reshape(-1, 1))


@pytest.mark.parametrize("ue8m0", [False, True])
@pytest.mark.parametrize("column_major", [False, True])
def test_vllm_quant_fp8_group(ue8m0: bool, column_major: bool) -> None:
    x, gs = _x((7, 128), BF16), 32
    xg = x.view(-1, 128 // gs, gs)
    absmax = xg.abs().max(dim=-1, keepdim=True)[0].float()
    raw = absmax / 448.0
    if ue8m0:
        raw = torch.exp2(torch.ceil(torch.log2(raw)))
    scales = raw.clamp(min=1.0 / (448.0 * 512.0))
    ref = (xg / scales).clamp(-448.0, 448.0).to(E4M3).view(x.shape)
    scales = scales.squeeze(-1).reshape(7, 128 // gs)
    q, s = N.per_token_group_fp8_quant(x, gs, column_major, ue8m0, 1e-10, E4M3, None, "min_scale")
    _same(q, ref)
    _same(s, scales)
    assert s.stride() == ((1, 7) if column_major else (4, 1))


def test_f16_quotient_matches_an_f16_division() -> None:
    x = _x((7, 64), F16)
    scale = torch.tensor([0.05], dtype=F16)
    ref = (x / scale).clamp(-448.0, 448.0).to(E4M3)
    _same(N.static_scaled_fp8_quant(x, scale, E4M3, None, "div quotient f16"), ref)


# --- the default variant is the contract ----------------------------------------------------


SCHEMES = [
    QuantScheme(E4M3, True, "tensor"),
    QuantScheme(E4M3, False, "tensor"),
    QuantScheme(E4M3, False, "token"),
    QuantScheme(E4M3, False, "group", 16, True, True),
    QuantScheme(torch.int8, True, "tensor"),
    QuantScheme(torch.int8, False, "token"),
]


@pytest.mark.parametrize("dtype", [F16, BF16, F32])
@pytest.mark.parametrize("scheme", SCHEMES, ids=str)
def test_default_variant_is_the_contract(scheme: QuantScheme, dtype: torch.dtype) -> None:
    x = _x((5, 64), dtype)
    scale = torch.tensor([0.03]) if scheme.static else None
    want = ops.quant_native(x, scheme, scale)
    got = quantize_variant(x, scheme, scale, None, None)
    _same(got[0], want[0])
    if not scheme.static:
        assert got[1] is not None and want[1] is not None
        _same(got[1], want[1])
        assert got[1].stride() == want[1].stride()


def test_a_field_equal_to_the_default_is_the_default() -> None:
    assert QuantScheme(E4M3, True, "tensor", variant=parse_variant("recip")).variant.is_default
    assert QuantScheme(E4M3, False, "token", variant=parse_variant("div min_scale")).variant \
        == DEFAULT_VARIANT
    assert not QuantScheme(torch.int8, True, "tensor", variant=parse_variant("recip")).variant \
        .is_default


@pytest.mark.parametrize("text, message", [
    ("quotient i8", "quotient dtype must be f32, bf16 or f16"),
    ("zero_eps", "zero_eps needs a value"),
    ("zero_eps x", "zero_eps needs a number"),
    ("bogus", "unknown keyword 'bogus'"),
])
def test_bad_variant_text(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_variant(text)


def test_variant_that_does_not_fit_the_op_names_it() -> None:
    with pytest.raises(ValueError, match="static_scaled_fp8_quant: .*variant 'scale' applies"):
        N.static_scaled_fp8_quant(torch.ones(2, 8), torch.ones(1), E4M3, None, "scale bf16")


# --- the native lowering computes the native's bits -----------------------------------------


LOWERING_CASES = {
    "ct_static_fp8": (
        "%x: tensor<2x?x64xbf16>, %s: tensor<1xbf16>, %z: tensor<1xbf16>",
        "%q = vllm.static_scaled_fp8_quant %x, %s zero_point(%z : tensor<1xbf16>) "
        "{variant = #vllm.quant_variant<div quotient bf16>} : tensor<2x?x64xbf16>, "
        "tensor<1xbf16> -> tensor<2x?x64xf8E4M3FN>\nfunc.return %q : tensor<2x?x64xf8E4M3FN>",
        "tensor<2x?x64xf8E4M3FN>",
        lambda: (_x((2, 5, 64), BF16), torch.tensor([0.02], dtype=BF16),
                 torch.tensor([0.0], dtype=BF16)),
    ),
    "ct_token_int8": (
        "%x: tensor<2x?x64xbf16>, %z: tensor<2x?x1xbf16>",
        "%q, %s = vllm.dynamic_per_token_scaled_int8_quant %x zero_point(%z : tensor<2x?x1xbf16>) "
        "{variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 7.8125e-03 range 127.5>}"
        " : tensor<2x?x64xbf16> -> tensor<2x?x64xi8>, tensor<?x1xbf16>\n"
        "func.return %q, %s : tensor<2x?x64xi8>, tensor<?x1xbf16>",
        "tensor<2x?x64xi8>, tensor<?x1xbf16>",
        lambda: (_x((2, 5, 64), BF16), torch.zeros(2, 5, 1, dtype=BF16)),
    ),
    "ct_group_fp8": (
        "%x: tensor<2x?x64xbf16>, %z: tensor<2x?x4xbf16>",
        "%q, %s = vllm.per_token_group_fp8_quant %x zero_point(%z : tensor<2x?x4xbf16>) "
        "{group_size = 16 : i64, variant = #vllm.quant_variant<quotient bf16 scale bf16 "
        "zero_eps 7.8125e-03>} : tensor<2x?x64xbf16> -> tensor<2x?x64xf8E4M3FN>, "
        "tensor<?x4xbf16>\n"
        "func.return %q, %s : tensor<2x?x64xf8E4M3FN>, tensor<?x4xbf16>",
        "tensor<2x?x64xf8E4M3FN>, tensor<?x4xbf16>",
        lambda: (_x((2, 5, 64), BF16),
                 (torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(2)) * 4).round()
                 .to(BF16)),
    ),
    "vllm_group_min_scale": (
        "%x: tensor<?x64xbf16>",
        "%q, %s = vllm.per_token_group_fp8_quant %x {group_size = 16 : i64, use_ue8m0 = true, "
        "column_major_scales = true, variant = #vllm.quant_variant<min_scale>} : "
        "tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x4xf32>\n"
        "func.return %q, %s : tensor<?x64xf8E4M3FN>, tensor<?x4xf32>",
        "tensor<?x64xf8E4M3FN>, tensor<?x4xf32>",
        lambda: (_x((7, 64), BF16),),
    ),
    "fused_token_recip": (
        "%x: tensor<?x64xf16>",
        "%q, %s = vllm.rms_norm_quant %x {epsilon = 1.0e-06 : f64, scheme = "
        "#vllm.quant<dynamic per_token recip quotient f16>} : tensor<?x64xf16> -> "
        "tensor<?x64xf8E4M3FN>, tensor<?x1xf32>\n"
        "func.return %q, %s : tensor<?x64xf8E4M3FN>, tensor<?x1xf32>",
        "tensor<?x64xf8E4M3FN>, tensor<?x1xf32>",
        lambda: (_x((7, 64), F16),),
    ),
}


@pytest.mark.parametrize("name", list(LOWERING_CASES))
def test_native_lowering_of_variants_is_bitwise(name: str) -> None:
    args, body, results, inputs = LOWERING_CASES[name]
    text = f"func.func @f({args}) -> ({results}) {{\n{body}\n}}"
    module = Parser(make_context(), text).parse_module()
    module.verify()
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    values = inputs()
    before = evaluate(fn, *values)
    report = lower_dispatch(module, "cpu", None)
    module.verify()
    assert {e.decision.provider for e in report} == {"native"}
    assert not [op for op in module.walk() if op.name.startswith("vllm.")]
    after = evaluate(fn, *values)
    for a, b in zip(before, after, strict=True):
        _same(a, b)
        assert a.stride() == b.stride()


# --- which variants the kernels run -----------------------------------------------------


def test_cuda_kernels_take_every_variant_and_zero_point() -> None:
    """The CUDA/HIP kernels implement every field (test_cuda_variants.py checks the numerics);
    supports_args rejects only a variant that does not parse and zero points of a shape the
    contract does not give."""
    from vllm_xdsl.backends.cuda import register as cuda_register

    x = TensorMeta(BF16, (7, 64), "cuda")
    base = {"x": x, "scale": TensorMeta(F32, (1,), "cuda"), "fp8_dtype": E4M3}

    def check(op: str = "static_scaled_fp8_quant", **a: object) -> bool | str:
        return cuda_register.supports_args("cuda", op, **{**base, **a})

    assert check(zero_point=None, variant="") is True
    assert check(zero_point=None, variant="div quotient bf16") is True
    assert check(zero_point=TensorMeta(BF16, (1,), "cuda"), variant="div quotient bf16") is True
    token = "dynamic_per_token_scaled_int8_quant"
    ct_int8 = f"quotient bf16 scale bf16 zero_eps {CT_EPS!r} range 127.5"
    assert check(token, zero_point=TensorMeta(BF16, (None, 1), "cuda"), variant=ct_int8) is True
    assert check("dynamic_scaled_fp8_quant", zero_point=None, variant=CT_TOKEN) is True
    assert check("rms_norm_quant", weight=None, epsilon=1e-6, scale=None, scale_ub=None,
                 quant_dtype=E4M3, static=False, granularity="group", group_size=16,
                 zero_point=None, variant="min_scale scale bf16") is True
    assert check(variant="quotient bf32") == "quant variant 'quotient bf32': quotient dtype must be f32, bf16 or f16"
    for zp in ((1,), (7, 4), (None, 4)):  # one zero point, or one per group (H / 16 = 4)
        assert check("per_token_group_fp8_quant", group_size=16,
                     zero_point=TensorMeta(BF16, zp, "cuda"), variant=CT_TOKEN) is True
    why = check(token, zero_point=TensorMeta(BF16, (7, 2), "cuda"), variant="")
    assert isinstance(why, str) and "zero point shape (7, 2)" in why


def test_triton_supports_args_takes_every_variant_field() -> None:
    """Triton runs every variant field, per-tensor scales included (an absmax kernel, then
    the variant's scale from the global absmax); a bad variant is rejected by name."""
    from vllm_xdsl.backends.triton import register as triton_register

    base = {"x": TensorMeta(BF16, (7, 64), "cuda"), "fp8_dtype": E4M3}

    def check(op: str, **a: object) -> bool | str:
        return triton_register.supports_args(op, **base, **a)

    token = "dynamic_per_token_scaled_fp8_quant"
    assert check(token, scale_ub=None, zero_point=None, variant="recip quotient bf16") is True
    assert check(token, scale_ub=None, zero_point=None, variant=CT_TOKEN) is True
    assert check("dynamic_scaled_fp8_quant", zero_point=None, variant=CT_TOKEN) is True
    assert check("dynamic_scaled_fp8_quant", zero_point=None, variant="scale f8") == (
        "quant variant 'scale f8': scale dtype must be f32, bf16 or f16")
    assert check(token, scale_ub=None, zero_point=TensorMeta(BF16, (1,), "cuda"), variant="") \
        is True
    # A zero point per group (compressed-tensors' FP8_BLOCK), unfused and fused
    # (test_triton_group_zero_points.py runs them).
    group = {"group_size": 32, "column_major_scales": False, "use_ue8m0": False, "eps": 1e-10}
    assert check("per_token_group_fp8_quant", **group, zero_point=TensorMeta(BF16, (7, 2), "cuda"),
                 variant=CT_TOKEN) is True
    assert check("per_token_group_fp8_quant", **group, zero_point=None, variant=CT_TOKEN) is True
    assert check("rms_norm_quant", weight=None, epsilon=1e-6, scale=None, scale_ub=None,
                 quant_dtype=E4M3, static=False, granularity="group", group_size=32,
                 column_major_scales=False, use_ue8m0=False, group_eps=1e-10,
                 zero_point=TensorMeta(BF16, (7, 2), "cuda"), variant=CT_TOKEN) is True


TRITON_VARIANTS = ["div", "recip", "div quotient bf16", "quotient f16", "recip quotient bf16"]


@pytest.mark.parametrize("dtype", [BF16, F16, F32])
@pytest.mark.parametrize("variant", TRITON_VARIANTS)
def test_triton_variants_match_the_native(variant: str, dtype: torch.dtype,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Interpreted Triton kernels vs the native, bit for bit (unfused and fused quants)."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from vllm_xdsl.backends.triton import functions as T
    from vllm_xdsl.ops import fused as F

    x, s, w = _x((7, 64), dtype, seed=3), torch.tensor([0.013]), torch.rand(64).to(dtype)
    _same(T.static_scaled_fp8_quant(x, s, variant=variant),
          N.static_scaled_fp8_quant(x, s, variant=variant))
    _same(T.static_scaled_int8_quant(x, s, variant=variant),
          N.static_scaled_int8_quant(x, s, variant=variant))
    for name in ("dynamic_per_token_scaled_fp8_quant", "dynamic_per_token_scaled_int8_quant",
                 "dynamic_scaled_fp8_quant"):
        got, want = getattr(T, name)(x, variant=variant), getattr(N, name)(x, variant=variant)
        _same(got[0], want[0])
        _same(got[1], want[1])
    got = T.per_token_group_fp8_quant(x, 16, True, True, variant=variant)
    want = N.per_token_group_fp8_quant(x, 16, True, True, variant=variant)
    _same(got[0], want[0])
    _same(got[1], want[1])
    args = (s, None, E4M3, True, "tensor")
    _same(T.rms_norm_quant(x, w, 1e-6, *args, variant=variant)[0],
          F.rms_norm_quant(x, w, 1e-6, *args, variant=variant)[0])
    args = (None, None, E4M3, False, "token")  # the f32 norm's scales may be an ulp off: q only
    _same(T.rms_norm_quant(x, w, 1e-6, *args, variant=variant)[0],
          F.rms_norm_quant(x, w, 1e-6, *args, variant=variant)[0])
    _same(T.silu_and_mul_quant(x, s, None, E4M3, True, "tensor", variant=variant)[0],
          F.silu_and_mul_quant(x, s, None, E4M3, True, "tensor", variant=variant)[0])


CT_TOKEN = f"quotient bf16 scale bf16 zero_eps {CT_EPS}"
TRITON_SCALE_VARIANTS = [CT_TOKEN, CT_TOKEN + " range 127.5", "scale f16 zero_eps 1e-06",
                         "min_scale", "recip min_scale quotient f16", "scale bf16"]


@pytest.mark.parametrize("dtype", [BF16, F16, F32])
@pytest.mark.parametrize("variant", TRITON_SCALE_VARIANTS)
def test_triton_scale_variants_match_the_native(variant: str, dtype: torch.dtype,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-token and per-group scales of a variant (scale dtype, floors, range), interpreted
    Triton vs the native, bit for bit; per tensor too (test_triton_tensor_variants.py has
    its own inputs: zero and tiny tensors)."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from vllm_xdsl.backends.triton import functions as T
    from vllm_xdsl.backends.triton import register as triton_register
    from vllm_xdsl.ops import fused as F

    x, w = _x((7, 64), dtype, seed=5), torch.rand(64).to(dtype)
    names = ["per_token_group_fp8_quant"] if "range" not in variant else []
    names += ["dynamic_scaled_fp8_quant"]
    if variant != "min_scale" and "min_scale" not in variant:
        names += ["dynamic_per_token_scaled_fp8_quant"]
        if "quotient f16" not in variant:
            names += ["dynamic_per_token_scaled_int8_quant"]
    for name in names:
        if name == "per_token_group_fp8_quant":
            got = T.per_token_group_fp8_quant(x, 16, True, True, variant=variant)
            want = N.per_token_group_fp8_quant(x, 16, True, True, variant=variant)
        else:
            got, want = getattr(T, name)(x, variant=variant), getattr(N, name)(x, variant=variant)
        _same(got[0], want[0])
        _same(got[1], want[1])
        assert got[1].stride() == want[1].stride()
    if "dynamic_per_token_scaled_fp8_quant" in names:
        args = (None, None, E4M3, False, "token")
        got = T.rms_norm_quant(x, w, 1e-6, *args, variant=variant)
        want = F.rms_norm_quant(x, w, 1e-6, *args, variant=variant)
        _same(got[0], want[0])
        if dtype != F32:  # the f32 norm may differ by an ulp, and its scale with it
            _same(got[1], want[1])
    meta = {"x": TensorMeta(dtype, (7, 64), "cpu"), "fp8_dtype": E4M3, "zero_point": None}
    assert triton_register.supports_args("dynamic_scaled_fp8_quant", **meta,
                                         variant=variant) is True


@pytest.mark.parametrize("shape", [(7, 64), (2, 5, 64)], ids=["2d", "3d"])
@pytest.mark.parametrize("dtype", [BF16, F16, F32])
def test_triton_zero_points_match_the_native(dtype: torch.dtype, shape: tuple[int, ...],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """compressed-tensors' variants with their runtime zero points, per tensor and per token:
    interpreted Triton vs the native, bit for bit, unfused and fused."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from vllm_xdsl.backends.triton import functions as T
    from vllm_xdsl.ops import fused as F

    x, w = _x(shape, dtype, seed=7), torch.rand(64).to(dtype)
    s = torch.tensor([0.013], dtype=BF16)
    zt = torch.tensor([2.0], dtype=BF16)
    zk = (torch.randn(*shape[:-1], 1, generator=torch.Generator().manual_seed(1)) * 3).round() \
        .to(BF16)
    int8_token = CT_TOKEN + " range 127.5"
    _same(T.static_scaled_fp8_quant(x, s, E4M3, zt, "div quotient bf16"),
          N.static_scaled_fp8_quant(x, s, E4M3, zt, "div quotient bf16"))
    _same(T.static_scaled_int8_quant(x, s, zt, "quotient bf16"),
          N.static_scaled_int8_quant(x, s, zt, "quotient bf16"))
    for got, want in (
        (T.dynamic_per_token_scaled_fp8_quant(x, None, E4M3, zk, CT_TOKEN),
         N.dynamic_per_token_scaled_fp8_quant(x, None, E4M3, zk, CT_TOKEN)),
        (T.dynamic_per_token_scaled_int8_quant(x, zk, int8_token),
         N.dynamic_per_token_scaled_int8_quant(x, zk, int8_token)),
    ):
        _same(got[0], want[0])
        _same(got[1], want[1])
    args = (s, None, E4M3, True, "tensor", 0, False, False, 1e-10, zt, "div quotient bf16")
    _same(T.rms_norm_quant(x, w, 1e-6, *args)[0], F.rms_norm_quant(x, w, 1e-6, *args)[0])
    args = (None, None, torch.int8, False, "token", 0, False, False, 1e-10, zk, int8_token)
    _same(T.rms_norm_quant(x, w, 1e-6, *args)[0], F.rms_norm_quant(x, w, 1e-6, *args)[0])
    r = torch.randn(shape).to(dtype)
    got = T.fused_add_rms_norm_quant(x, r, w, 1e-6, *args)
    want = F.fused_add_rms_norm_quant(x, r, w, 1e-6, *args)
    _same(got[0], want[0])
    _same(got[1], want[1])
