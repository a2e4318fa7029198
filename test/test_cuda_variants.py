"""The CUDA/HIP kernels of every quant variant field and zero point against their native
contract (natives_variant.quantize_variant, docs/OPS.md "Variants"), without a GPU.

The kernels run through the g++ emulation (warp32, warp64; and a GPU where torch sees one),
unfused and fused with a norm. Each case must meet the OPS.md tolerance, and, because the
variant epilogue computes each rounding of the contract exactly, equal the native bit for
bit where the producer is exact: the unfused quants, and the norms on integer-valued inputs
(whose sums of squares are exact in any order). The data are built so that every field
changes the native's result (checked: the variant native differs from the default one), so
a kernel that ignored a field would fail: a row of zeros (the floors), a row of fp8 / int8
rounding ties at a known scale (div vs recip, the quotient rounding) and random rows (the
scale dtype, the range).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch
from helpers.cuda_emulated import KERNEL_BUILDS, build_kernels

from vllm_xdsl import ops
from vllm_xdsl.backends.cuda.kernels import Kernels
from vllm_xdsl.backends.cuda.register import supports_args
from vllm_xdsl.backends.cuda.torch_ops import _unfused_scheme, define
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.ops import fused as F
from vllm_xdsl.ops import natives as N
from vllm_xdsl.ops.dispatch import meta_args
from vllm_xdsl.ops.grid import VARIANTS, cases
from vllm_xdsl.ops.impl import TensorMeta
from vllm_xdsl.ops.tolerance import contract_error
from vllm_xdsl.verify import check_case

E4M3, E4M3FNUZ, I8 = torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.int8
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
EPS_BF16 = repr(torch.finfo(torch.bfloat16).eps)  # compressed-tensors' zero_eps in bf16
CT_FP8 = f"quotient bf16 scale bf16 zero_eps {EPS_BF16}"  # FP8_DYNAMIC
CT_INT8 = f"{CT_FP8} range 127.5"  # W8A8 dynamic int8
TIE_SCALE = 3.0 / 16.0  # static scale of the tie rows; 1 / TIE_SCALE is not exact in f32


@pytest.fixture(scope="module", params=KERNEL_BUILDS)
def kernels(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Kernels:
    return build_kernels(request.param, tmp_path_factory)


def _qmax(qd: torch.dtype) -> float:
    return 127.0 if qd == I8 else (448.0 if qd == E4M3 else 224.0)


def _ties(qd: torch.dtype, n: int, g: torch.Generator) -> torch.Tensor:
    """n quotients on rounding ties of qd: fp8 midpoints, or k + 1/2 for int8."""
    if qd == I8:
        return torch.randint(-40, 41, (n,), generator=g).float() + 0.5
    grid = torch.arange(256, dtype=torch.uint8).view(qd).float()
    grid = grid[torch.isfinite(grid) & (grid >= 0) & (grid <= _qmax(qd))].unique()
    mids = (grid[1:] + grid[:-1]) / 2
    sign = torch.randint(0, 2, (n,), generator=g).float() * 2 - 1
    return mids[torch.randint(0, len(mids), (n,), generator=g)] * sign


def _data(qd: torch.dtype, dtype: torch.dtype, shape: tuple[int, int], seed: int,
          group: int = 0) -> torch.Tensor:
    """Row 0 zeros, row 1 ties at TIE_SCALE (its absmax, at every group start, makes the
    dynamic scale TIE_SCALE too; in f32, near ties), the rest random."""
    g = torch.Generator().manual_seed(seed)
    t, h = shape
    x = torch.randn(t, h, generator=g) * 3
    x[0] = 0
    if t > 1:
        x[1] = _ties(qd, h, g) * TIE_SCALE
        if dtype == torch.float32:  # a few ulps off: x / s and x * (1 / s) then round apart
            ulps = torch.randint(-2, 3, (h,), generator=g, dtype=torch.int32)
            x[1] = (x[1].view(torch.int32) + ulps).view(torch.float32)
        x[1, :: group or h] = _qmax(qd) * TIE_SCALE
    return x.to(dtype)


def _zero_point(spec: str | None, rows: int, seed: int, groups: int = 1) -> torch.Tensor | None:
    """'tensor:bf16' ([1]), 'token:int8' ([T, 1]), 'group:f32' ([T, G]), ...: small values,
    integral but for f32."""
    if spec is None:
        return None
    kind, dt = spec.split(":")
    g = torch.Generator().manual_seed(seed)
    shape = {"tensor": (1,), "token": (rows, 1)}.get(kind, (rows, groups))
    if dt == "f32":  # not integral: the zero point's and the sum's rounding to qd show
        return torch.randn(shape, generator=g) * 2.3
    v = torch.randint(0 if dt == "uint8" else -4, 5, shape, generator=g).float()
    return v.to(getattr(torch, {"bf16": "bfloat16", "f16": "float16"}.get(dt, dt)))


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.dtype in (E4M3, E4M3FNUZ) else t


def _same(a: tuple, b: tuple, nan_equal: bool = False) -> bool:
    """Bit for bit (fp8 codes compared as such); with nan_equal, a NaN matches any NaN (its
    sign is no part of the contract)."""
    def same(x: torch.Tensor, y: torch.Tensor) -> bool:
        if nan_equal and x.is_floating_point():
            x, y = x.float(), y.float()
            return torch.equal(x.isnan(), y.isnan()) and torch.equal(x.nan_to_num(0.0), y.nan_to_num(0.0))
        return torch.equal(_bits(x), _bits(y))
    return all(x.dtype == y.dtype and same(x, y) for x, y in zip(a, b, strict=True))


def _check(got: tuple, want: tuple, what: str, exact: bool = True) -> None:
    assert len(got) == len(want), what
    for g, w in zip(got, want, strict=True):
        assert (g.shape, g.stride(), g.dtype) == (w.shape, w.stride(), w.dtype), what
        kind = "value" if g.dtype in (I8, E4M3, E4M3FNUZ) else "scales"
        problem = contract_error(g, w, kind=kind)
        assert problem is None, f"{what}: {problem}"
    if exact:
        diff = [i for i, (g, w) in enumerate(zip(got, want, strict=True))
                if not torch.equal(_bits(g), _bits(w))]
        assert not diff, f"{what}: output(s) {diff} not bit-exact"


# --- unfused quants ---------------------------------------------------------------------

# (op, variant, zero point): every field alone and the compressed-tensors combinations.
UNFUSED = [
    ("static_scaled_fp8_quant", "div", None),
    ("static_scaled_fp8_quant", "quotient bf16", None),
    ("static_scaled_fp8_quant", "quotient f16", None),
    ("static_scaled_fp8_quant", "", "tensor:bf16"),
    ("static_scaled_fp8_quant", "div quotient bf16", "tensor:bf16"),  # compressed-tensors FP8
    ("static_scaled_fp8_quant", "div quotient bf16", "tensor:f32"),
    ("static_scaled_fp8_quant", "quotient bf16", "tensor:float8_e4m3fn"),  # converted on the host
    ("dynamic_scaled_fp8_quant", "div", None),
    ("dynamic_scaled_fp8_quant", "quotient bf16", None),
    ("dynamic_scaled_fp8_quant", "scale bf16", None),
    ("dynamic_scaled_fp8_quant", "scale f16", None),
    ("dynamic_scaled_fp8_quant", "range 200.0", None),  # zero_eps: test_all_zero_tensor_floors
    ("dynamic_scaled_fp8_quant", CT_FP8, "tensor:f32"),
    ("dynamic_per_token_scaled_fp8_quant", "recip", None),
    ("dynamic_per_token_scaled_fp8_quant", "quotient bf16", None),
    ("dynamic_per_token_scaled_fp8_quant", "scale bf16", None),
    ("dynamic_per_token_scaled_fp8_quant", f"zero_eps {EPS_BF16}", None),
    ("dynamic_per_token_scaled_fp8_quant", "range 300.0", None),
    ("dynamic_per_token_scaled_fp8_quant", "", "token:bf16"),
    ("dynamic_per_token_scaled_fp8_quant", CT_FP8, "token:bf16"),  # FP8_DYNAMIC
    ("dynamic_per_token_scaled_fp8_quant", CT_FP8, "tensor:float64"),  # converted on the host
    ("per_token_group_fp8_quant", "min_scale", None),
    ("per_token_group_fp8_quant", "recip", None),
    ("per_token_group_fp8_quant", "quotient bf16", None),
    ("per_token_group_fp8_quant", "scale bf16", None),
    ("per_token_group_fp8_quant", f"zero_eps {EPS_BF16}", None),
    ("per_token_group_fp8_quant", "range 400.0", None),
    ("per_token_group_fp8_quant", "min_scale scale bf16 recip", None),
    ("per_token_group_fp8_quant", "", "tensor:int8"),
    ("per_token_group_fp8_quant", "", "group:f32"),
    ("per_token_group_fp8_quant", CT_FP8, "group:bf16"),  # compressed-tensors FP8_BLOCK
    ("static_scaled_int8_quant", "recip", None),
    ("static_scaled_int8_quant", "quotient bf16", None),
    ("static_scaled_int8_quant", "", "tensor:int8"),
    ("static_scaled_int8_quant", "quotient bf16", "token:uint8"),
    ("dynamic_per_token_scaled_int8_quant", "recip", None),
    ("dynamic_per_token_scaled_int8_quant", "quotient bf16", None),
    ("dynamic_per_token_scaled_int8_quant", "scale f16", None),
    ("dynamic_per_token_scaled_int8_quant", f"zero_eps {EPS_BF16}", None),
    ("dynamic_per_token_scaled_int8_quant", "range 127.5", None),
    ("dynamic_per_token_scaled_int8_quant", "", "token:f16"),
    ("dynamic_per_token_scaled_int8_quant", CT_INT8, "token:bf16"),  # W8A8
]
SHAPES = ((7, 64), (5, 36))  # 36: the scalar path for f16 / bf16 (no 16-byte vectors)


def _unfused_calls(k: Kernels, op: str, x: torch.Tensor, variant: str,
                   zp: torch.Tensor | None, qd: torch.dtype) -> list[tuple[str, Callable, Callable]]:
    """(label, kernel call, native call(variant, zero point)) of op on x."""
    scale = torch.tensor([TIE_SCALE])
    if op == "static_scaled_fp8_quant":
        s = _unfused_scheme(qd, True, "tensor", variant, op)
        return [("", lambda: k.quant(op, x, s, scale, None, zp)[:1],
                 lambda v, z: (N.static_scaled_fp8_quant(x, scale, qd, z, v),))]
    if op == "static_scaled_int8_quant":
        s = _unfused_scheme(I8, True, "tensor", variant, op)
        return [("", lambda: k.quant(op, x, s, scale, None, zp)[:1],
                 lambda v, z: (N.static_scaled_int8_quant(x, scale, z, v),))]
    if op == "dynamic_scaled_fp8_quant":
        return [("", lambda: k.dynamic_scaled_fp8_quant(x, qd, zp, parse_variant(variant)),
                 lambda v, z: N.dynamic_scaled_fp8_quant(x, qd, z, v))]
    if op == "dynamic_per_token_scaled_int8_quant":
        s = _unfused_scheme(I8, False, "token", variant, op)
        return [("", lambda: k.quant(op, x, s, None, None, zp),
                 lambda v, z: N.dynamic_per_token_scaled_int8_quant(x, z, v))]
    if op == "dynamic_per_token_scaled_fp8_quant":
        s = _unfused_scheme(qd, False, "token", variant, op)
        calls = []
        for ub in (None, (x.float().abs().amax() * 0.5).reshape(1)):
            calls.append((f"ub={ub is not None}",
                          lambda ub=ub: k.quant(op, x, s, None, ub, zp),
                          lambda v, z, ub=ub: N.dynamic_per_token_scaled_fp8_quant(x, ub, qd, z, v)))
        return calls
    calls = []
    gs = 16 if x.shape[-1] % 16 == 0 else 12
    for col, ue8m0 in ((False, False), (True, True)):
        s = _unfused_scheme(qd, False, "group", variant, op, group_size=gs,
                            column_major_scales=col, use_ue8m0=ue8m0)
        calls.append((f"col={col} ue8m0={ue8m0}", lambda s=s: k.quant(op, x, s, None, None, zp),
                      lambda v, z, c=col, u=ue8m0: N.per_token_group_fp8_quant(
                          x, gs, c, u, 1e-10, qd, z, v)))
    return calls


@pytest.mark.parametrize(("op", "variant", "zp_spec"), UNFUSED,
                         ids=[f"{o}-{v or 'default'}-{z}" for o, v, z in UNFUSED])
def test_unfused_variant(kernels: Kernels, op: str, variant: str, zp_spec: str | None) -> None:
    qds = (I8,) if "int8" in op else (E4M3, E4M3FNUZ) if op.startswith("static") else (E4M3,)
    visible = False
    for qd in qds:
        for dtype in DTYPES:
            for i, shape in enumerate(SHAPES):
                group = (16 if shape[1] % 16 == 0 else 12) if "group" in op else 0
                x = _data(qd, dtype, shape, seed=10 * i + DTYPES.index(dtype), group=group)
                zp = _zero_point(zp_spec, shape[0], seed=i, groups=shape[1] // (group or shape[1]))
                for label, kernel, native in _unfused_calls(kernels, op, x, variant, zp, qd):
                    want = native(variant, zp)
                    _check(kernel(), want, f"{str(qd)[6:]} {str(dtype)[6:]} {shape} {label}")
                    visible = visible or not _same(want, native("", None))
    assert visible, "the test data do not show this variant: the natives agree with the default"


def test_all_zero_tensor_floors(kernels: Kernels) -> None:
    # Per tensor, a floor shows only on an all-zero tensor: min_scale vs zero_eps.
    x = torch.zeros(3, 16, dtype=torch.bfloat16)
    for variant in ("", f"zero_eps {EPS_BF16}", f"scale bf16 zero_eps {EPS_BF16}", "div"):
        got = kernels.dynamic_scaled_fp8_quant(x, E4M3, None, parse_variant(variant))
        _check(got, N.dynamic_scaled_fp8_quant(x, E4M3, None, variant), variant)
    want = N.dynamic_scaled_fp8_quant(x, E4M3, None, f"zero_eps {EPS_BF16}")
    assert want[1].item() == torch.finfo(torch.bfloat16).eps != N.dynamic_scaled_fp8_quant(x)[1].item()


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_nan_and_inf_with_variants(kernels: Kernels) -> None:
    # NaN / inf rows give what the variant native gives, bit for bit (NaN scales included).
    x = _data(E4M3, torch.bfloat16, (4, 64), seed=5)
    x[1, 5], x[2, 9], x[3, 33] = float("nan"), float("inf"), -float("inf")
    zp = torch.tensor([[1.0], [2.0], [-1.0], [0.0]], dtype=torch.bfloat16)
    scale = torch.tensor([TIE_SCALE])
    cases = [
        ("static", kernels.quant("s", x, _unfused_scheme(E4M3, True, "tensor", "div quotient bf16"),
                                 scale, None, zp[:1])[:1],
         (N.static_scaled_fp8_quant(x, scale, E4M3, zp[:1], "div quotient bf16"),)),
        ("tensor", kernels.dynamic_scaled_fp8_quant(x, E4M3, zp[:1], parse_variant(CT_FP8)),
         N.dynamic_scaled_fp8_quant(x, E4M3, zp[:1], CT_FP8)),
        ("token", kernels.quant("t", x, _unfused_scheme(E4M3, False, "token", CT_FP8), None, None, zp),
         N.dynamic_per_token_scaled_fp8_quant(x, None, E4M3, zp, CT_FP8)),
        ("token int8", kernels.quant("t", x, _unfused_scheme(I8, False, "token", CT_INT8), None, None, zp),
         N.dynamic_per_token_scaled_int8_quant(x, zp, CT_INT8)),
        ("group", kernels.quant("g", x, _unfused_scheme(E4M3, False, "group", "min_scale scale bf16",
                                                        group_size=16, use_ue8m0=True), None, None),
         N.per_token_group_fp8_quant(x, 16, False, True, 1e-10, E4M3, None, "min_scale scale bf16")),
    ]
    wrong = [name for name, got, want in cases if not _same(got, want, nan_equal=True)]
    assert not wrong, wrong


# --- fused with a norm (and an activation) -------------------------------------------------

# (quant dtype, static, granularity, group_size, column_major, ue8m0, scale_ub, variant, zp)
FUSED = [
    (E4M3, True, "tensor", 0, False, False, False, "div quotient bf16", "tensor:bf16"),
    (E4M3FNUZ, True, "tensor", 0, False, False, False, "div quotient f16", "tensor:f32"),
    (I8, True, "tensor", 0, False, False, False, "quotient bf16", None),
    (I8, True, "tensor", 0, False, False, False, "", "tensor:int8"),
    (E4M3, False, "token", 0, False, False, False, CT_FP8, "token:bf16"),
    (E4M3, False, "token", 0, False, False, True, CT_FP8, "token:bf16"),
    (E4M3, False, "token", 0, False, False, False, "scale bf16", None),
    (E4M3, False, "token", 0, False, False, False, f"zero_eps {EPS_BF16}", None),
    (E4M3, False, "token", 0, False, False, False, "range 300.0", None),
    (I8, False, "token", 0, False, False, False, CT_INT8, "token:bf16"),
    (I8, False, "token", 0, False, False, False, "quotient bf16 recip", None),
    (E4M3, False, "group", 16, False, False, False, "min_scale", None),
    (E4M3, False, "group", 16, True, True, False, "scale bf16", None),
    (E4M3, False, "group", 16, False, False, False, f"zero_eps {EPS_BF16} range 100.0", None),
    (E4M3, False, "group", 16, True, False, False, CT_FP8, "group:bf16"),  # FP8_BLOCK
]
FUSED_SHAPES = ((7, 64), (3, 4096))


def _ints(shape: tuple[int, int], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Integer values (exact sums of squares in any order), row 0 zero."""
    x = torch.randint(-16, 17, shape, generator=torch.Generator().manual_seed(seed)).float()
    x[0] = 0
    return x.to(dtype)


def _fused_id(c: tuple) -> str:
    qd, static, gran, gs, col, ue, ub, variant, zp = c
    return (f"{str(qd)[6:]}-{'static' if static else gran}{'-col' if col else ''}"
            f"{'-ue8m0' if ue else ''}{'-ub' if ub else ''}-{variant or 'default'}-{zp}")


@pytest.mark.parametrize("case", FUSED, ids=[_fused_id(c) for c in FUSED])
def test_fused_variant(kernels: Kernels, case: tuple) -> None:
    visible = False
    for dtype in DTYPES:
        for i, shape in enumerate(FUSED_SHAPES):
            visible = _fused_norm_quants(kernels, case, dtype, shape, seed=i) or visible
    assert visible, "the test data do not show this variant: the natives agree with the default"


def _fused_norm_quants(kernels: Kernels, case: tuple, dtype: torch.dtype,
                       shape: tuple[int, int], seed: int) -> bool:
    """Check rms_norm_quant and fused_add_rms_norm_quant (both sums, in place); whether the
    variant native differs from the default one on these data."""
    qd, static, gran, gs, col, ue8m0, with_ub, variant, zp_spec = case
    x, r = _ints(shape, dtype, 2 * seed), _ints(shape, dtype, 2 * seed + 1)
    w = torch.randn(shape[1], generator=torch.Generator().manual_seed(seed)).to(dtype)
    zp = _zero_point(zp_spec, shape[0], seed=seed, groups=shape[1] // (gs or shape[1]))
    y = N.rms_norm(x, w, 1e-6)
    scale = (y.float().abs().amax() / _qmax(qd) * 0.8).reshape(1) if static else None
    ub = (y.float().abs().amax() * 0.5).reshape(1) if with_ub else None
    base = (qd, static, gran, gs, col, ue8m0, 1e-10)
    what = f"{str(dtype)[6:]} {shape}"

    def norm(v: str, z: torch.Tensor | None) -> tuple:
        return F.rms_norm_quant(x, w, 1e-6, scale, ub, *base, zero_point=z, variant=v)

    def add(rounded: bool) -> tuple:
        return F.fused_add_rms_norm_quant(x, r, w, 1e-6, scale, ub, *base, zero_point=zp,
                                          variant=variant, rounded_sum=rounded)

    args = (*base, variant)
    _check(kernels.fused("rms_norm_quant", x, None, w, 1e-6, scale, ub, args, zero_point=zp),
           norm(variant, zp), f"rms_norm_quant {what}")
    for rounded in (False, True):
        _check(kernels.fused("fused_add_rms_norm_quant", x, r, w, 1e-6, scale, ub, args, rounded,
                             zero_point=zp), add(rounded),
               f"fused_add_rms_norm_quant rounded_sum={rounded} {what}")
    ri = r.clone()
    got = kernels.fused("fused_add_rms_norm_quant", x, ri, w, 1e-6, scale, ub, args,
                        inplace=True, zero_point=zp)
    assert got[1] is ri
    _check(got, add(False), f"fused_add_rms_norm_quant in place {what}")
    return not _same(norm(variant, zp), norm("", None))


@pytest.mark.parametrize("case", [FUSED[0], FUSED[4], FUSED[9], FUSED[12], FUSED[14]],
                         ids=[_fused_id(c) for c in (FUSED[0], FUSED[4], FUSED[9], FUSED[12],
                                                     FUSED[14])])
def test_act_and_mul_quant_variant(kernels: Kernels, case: tuple) -> None:
    # The act-and-mul producers round expf / erff like a GPU, not like torch's CPU kernels:
    # within the OPS.md tolerance, not bit for bit (test_cuda_emulated._act_quant).
    qd, static, gran, gs, col, ue8m0, with_ub, variant, zp_spec = case
    for op in ("silu_and_mul_quant", "gelu_tanh_and_mul_quant"):
        for dtype in DTYPES:
            x = (torch.randn(5, 128, generator=torch.Generator().manual_seed(3)) * 3).to(dtype)
            zp = _zero_point(zp_spec, 5, seed=4, groups=64 // (gs or 64))
            y = ops.ALL_OPS[op.removesuffix("_quant")].native(x)
            scale = (y.float().abs().amax() / _qmax(qd) * 0.8).reshape(1) if static else None
            base = (qd, static, gran, gs, col, ue8m0, 1e-10)
            got = kernels.fused(op, x, None, None, 0.0, scale, None, (*base, variant),
                                zero_point=zp)
            want = getattr(F, op)(x, scale, None, *base, zero_point=zp, variant=variant)
            _check(got, want, f"{op} {str(dtype)[6:]}", exact=False)


def test_verify_grid_variant_cases(kernels: Kernels) -> None:
    """The variant rows `python -m vllm_xdsl.verify` checks of the cuda provider on a GPU
    (ops/grid.py VARIANTS and VARIANTS_FUSED), through the emulation: the provider's
    supports_args takes every one, and every one meets the contract."""
    fns = define("cuda", kernels)  # the torch ops' functions, on these kernels
    checked: set[str] = set()
    problems = []
    for name, op in ops.ALL_OPS.items():
        for case in cases(name):
            if "variant=" not in case.label:
                continue
            metas = {k: dataclasses.replace(v, device="cuda") if isinstance(v, TensorMeta) else v
                     for k, v in meta_args(op, case.args, case.kwargs).items()}
            assert supports_args("cuda", name, **metas) is True, case.label
            problem, _ = check_case(op, getattr(fns, name), case)
            if problem is not None:
                problems.append(f"{name}: {problem}")
            checked.add(name)
    assert not problems, problems
    assert checked >= {*VARIANTS, "rms_norm_quant", "silu_and_mul_quant"}, checked
