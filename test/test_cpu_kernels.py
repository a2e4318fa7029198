"""The cpu provider (the kernel family built for the host): exact where the contract is
exact, within its tolerance elsewhere, and chosen by target cpu's default priority.

The library is built once per session (VLLM_XDSL_CACHE_DIR keeps it between sessions):
every test here calls the same cached build.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest
import torch

from vllm_xdsl import ops
from vllm_xdsl.backends.cpu.host import host_problem
from vllm_xdsl.ops.dispatch import meta_args, select
from vllm_xdsl.ops.grid import cases
from vllm_xdsl.ops.policy import platform_default
from vllm_xdsl.verify import verify_impl

pytestmark = pytest.mark.skipif(host_problem() is not None, reason=str(host_problem()))

FP8 = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)


def cpu(op: str):  # noqa: ANN201 - the registered callable
    return ops.ALL_OPS[op].impls()["cpu"].fn


def special_values(n: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Random values over many magnitudes plus the ones rounding gets wrong: ties of the
    int8 / fp8 grids after scaling, denormals, zeros of both signs, infinities, NaN."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-12, 12, (n,), generator=g).float())
    ties = (torch.arange(-300, 300).float() + 0.5) * 0.25  # k + 1/2 after / 0.25
    fp8_ties = torch.tensor([1.0625, 1.1875, 17.0, 19.0, 0.013671875, 0.009765625]) * 0.25
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40,
                            -3e-39, 6e4, -1e30, 1e30])
    return torch.cat([special, ties, fp8_ties, -fp8_ties, x])[:n].to(dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype in FP8 or a.dtype == torch.int8:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return torch.equal(a.float().nan_to_num(7.0), b.float().nan_to_num(7.0))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_unfused_quants_are_bit_exact(dtype: torch.dtype) -> None:
    # No reduction order is involved (absmax is exact): the kernels must equal the native
    # in every bit, on ties (the division without a division, vquot), NaN, inf, denormals.
    x = torch.cat([special_values(4096, dtype, s).reshape(-1, 64) for s in range(4)])
    for scale in (0.25, 0.0123, 3.1e-3, 7.0):
        s = torch.tensor([scale])
        for fp8 in FP8:
            assert same_bits(cpu("static_scaled_fp8_quant")(x, s, fp8),
                             ops.static_scaled_fp8_quant.native(x, s, fp8))
        for variant in ("", "recip"):  # recip: vLLM CPU's int8 numerics, raised
            assert same_bits(cpu("static_scaled_int8_quant")(x, s, None, variant),
                             ops.static_scaled_int8_quant.native(x, s, None, variant))
    finite = x.nan_to_num(0.0, 0.0, 0.0)  # a NaN / inf absmax makes every scale NaN / inf
    for fn, args in (("dynamic_per_token_scaled_int8_quant", ()),
                     ("dynamic_per_token_scaled_int8_quant", (None, "recip")),
                     ("dynamic_per_token_scaled_fp8_quant", ()),
                     ("per_token_group_fp8_quant", (16,)),
                     ("dynamic_scaled_fp8_quant", ())):
        for data in (x, finite):
            got = cpu(fn)(data, *args)
            want = ops.ALL_OPS[fn].native(data, *args)
            for a, b in zip(got, want, strict=True):
                assert same_bits(a, b), fn


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_residual_rounds_to_nearest_even(dtype: torch.dtype) -> None:
    # residual_out = (x + residual) rounded once to x's dtype: vLLM's CPU kernels truncate in
    # bf16, the contract rounds to nearest even (denormal sums included).
    x = special_values(8192, dtype, 1).reshape(-1, 128)
    for r in (special_values(8192, dtype, 2), special_values(8192, dtype, 2).roll(1)):
        r = r.reshape(-1, 128)  # rolled: inf meets -inf, NaN meets a number
        _, res = cpu("fused_add_rms_norm")(x.clone(), r.clone(), None, 1e-6)
        assert same_bits(res, (x.float() + r.float()).to(dtype))
        assert torch.equal(res.isnan(), (x.float() + r.float()).isnan())
    tiny = torch.full((2, 64), 1e-39).to(dtype)
    _, res = cpu("fused_add_rms_norm")(tiny.clone(), tiny.clone(), None, 1e-6)
    assert same_bits(res, (tiny.float() * 2).to(dtype))


def test_norm_and_act_bf16_at_model_shapes() -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 4096, generator=g).bfloat16()
    w = torch.randn(4096, generator=g).bfloat16()
    got, want = cpu("rms_norm")(x, w, 1e-6), ops.rms_norm.native(x, w, 1e-6)
    assert (got != want).float().mean() < 1e-3  # only where the sum order moves a step
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1.6e-2)
    a = torch.randn(64, 2 * 4096, generator=g).bfloat16()
    got, want = cpu("silu_and_mul")(a), ops.silu_and_mul.native(a)
    assert (got != want).float().mean() < 1e-3
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1.6e-2)


def test_norm_nan_and_inf_where_the_native_has_them() -> None:
    """The norm skips its rounding's NaN test on rows that cannot make a NaN (a finite
    variance over the whole row, a finite weight): each way a NaN can still arise."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(4, 256, generator=g).bfloat16()
    x[0, 200] = float("inf")  # past variance_size 128: the variance stays finite
    x[1, 7] = float("nan")
    x[2, :] = 0.0  # with epsilon 0: rsqrt(0) is inf, and 0 * inf NaN
    w = torch.randn(256, generator=g).bfloat16()
    w_nan, w_inf = w.clone(), w.clone()
    w_nan[3] = float("nan")
    w_inf[9] = float("inf")
    # A float32 NaN whose low bits are all set: rounding it to bf16 without the NaN test
    # carries into the sign (-0).
    w_payload = w.float()
    w_payload.view(torch.int32)[3] = 0x7FFFFFFF
    for args in ((x, w, 1e-6), (x, w, 1e-6, 128), (x, w, 0.0), (x, w_nan, 1e-6),
                 (x, w_inf, 1e-6), (x, w_inf.float(), 1e-6), (x, w_payload, 1e-6),
                 (x, None, 0.0, 128)):
        got, want = cpu("rms_norm")(*args), ops.rms_norm.native(*args)
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
        finite = want.isfinite()
        torch.testing.assert_close(got[finite], want[finite], atol=1e-3, rtol=1.6e-2)


def _libm_gelus(a: np.ndarray) -> dict[str, np.ndarray]:
    """kernels.cuh's GELU formulas in f32 with the C library's erff / tanhf, step by step."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    for fn in (libm.erff, libm.tanhf):
        fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    f32 = np.float32
    z = a * f32(0.70710678118654752)
    u = f32(0.79788456080286536) * (a + f32(0.044715) * a * a * a)
    erf = np.array([libm.erff(float(v)) for v in z], dtype=f32)
    tanh = np.array([libm.tanhf(float(v)) for v in u], dtype=f32)
    return {"gelu_and_mul": a * f32(0.5) * (f32(1) + erf),
            "gelu_tanh_and_mul": f32(0.5) * a * (f32(1) + tanh)}


def test_vector_gelus_round_to_the_c_librarys_values() -> None:
    """The kernels evaluate erf and tanh with polynomials of their own (about an ulp in f32):
    on every finite bf16 value their GELUs round to the bf16 values that erff / tanhf give."""
    codes = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    a = codes[codes.float().isfinite()].reshape(-1, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        want = _libm_gelus(a.float().reshape(-1).numpy())
    for op, values in want.items():
        got = cpu(op)(a, torch.ones_like(a)).reshape(-1)
        assert same_bits(got, torch.from_numpy(values).to(torch.bfloat16)), op


@pytest.mark.parametrize("op", sorted(n for n, o in ops.ALL_OPS.items() if "cpu" in o.impls()))
def test_verify_grid(op: str) -> None:
    """Every op the provider registers, over the reduced grid of docs/OPS.md (variants
    included), through `python -m vllm_xdsl.verify`'s own checks."""
    rows = verify_impl(ops.ALL_OPS[op], ops.ALL_OPS[op].impls()["cpu"], False, "cpu")
    assert rows
    for row in rows:
        assert row.failure is None, row.failure
        assert row.unavailable is None, row.unavailable
        assert row.passed > 0, row.skipped[:1]


def test_every_grid_case_runs_or_is_rejected_with_a_reason() -> None:
    for name, op in ops.ALL_OPS.items():
        impl = op.impls().get("cpu")
        if impl is None:
            continue
        for case in cases(name, False, "cpu"):
            why = impl.rejects(meta_args(op, case.args, case.kwargs))
            assert why is None or why.strip(), (name, case.label)


def test_priority_cpu_selects_it() -> None:
    # Opt-in for target cpu (not in its default until measured faster on a quiet machine).
    assert [c.provider for c in platform_default("cpu")] == ["native"]
    x, w = torch.randn(3, 64).bfloat16(), torch.randn(64).bfloat16()
    args = meta_args("rms_norm", (x, w, 1e-6))
    assert select("rms_norm", args, "cpu", "cpu").provider == "cpu"
    # An argument the kernels do not take falls back to the native, with the reason.
    x8 = torch.randn(3, 64).to(torch.float8_e4m3fn)
    decision = select("rms_norm", meta_args("rms_norm", (x8, None, 1e-6)), "cpu", "cpu")
    assert decision.provider == "native" and decision.rejected[0][0] == "cpu"


def test_gpu_target_rejects_cpu_with_a_reason() -> None:
    why = ops.rms_norm.impls()["cpu"].unavailable("cuda")
    assert why is not None and "cpu" in why


def test_compiled_graph_runs_the_fused_cpu_kernel(tmp_path, monkeypatch) -> None:
    """torch.compile with priority cpu: the norm and the int8 quant fuse, lower to
    `cpu.fused_add_rms_norm_quant` (in place on the copied residual) and export to its torch
    op; the outputs equal eager's natives."""

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(64).bfloat16(), requires_grad=False)

        def forward(self, x: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y, r2 = ops.fused_add_rms_norm(x, r, self.w, 1e-6)
            return ops.dynamic_per_token_scaled_int8_quant(y)[0], r2

    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    layer = Layer()
    x, r = torch.randn(5, 64).bfloat16(), torch.randn(5, 64).bfloat16()
    want = layer(x, r)
    compiled = torch.compile(layer, backend="vllm_xdsl",
                             options={"priority": "cpu", "inner": "eager", "strict": True})
    got = compiled(x, r)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    lowered = "".join(p.read_text() for p in tmp_path.rglob("*lower-dispatch.mlir"))
    assert "cpu.fused_add_rms_norm_quant" in lowered
