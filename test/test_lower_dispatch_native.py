"""The native lowering of every op computes exactly what its native function computes.

Each case is one vllm op in a function; lower-dispatch (target cpu: native) turns it into
torch.calls, which the reference evaluator runs. Results must equal the native's bit for
bit (same casts, same order), with the native's strides (column-major scales).
"""

from __future__ import annotations

import pytest
import torch
from helpers.evaluate import evaluate
from xdsl.dialects import func
from xdsl.parser import Parser

from vllm_xdsl import ops
from vllm_xdsl.dialects import make_context
from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.transforms.lowering.lower_dispatch import lower_dispatch

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
T, H = 7, 64


@pytest.fixture(autouse=True)
def _no_env_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_XDSL_PRIORITY", raising=False)


def _parse(text: str):
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def _lower_and_run(text: str, *inputs: torch.Tensor):
    """(native values of the unlowered vllm op, values of its lowering), plus the module."""
    module = _parse(text)
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    before = evaluate(fn, *inputs)  # vllm op through its native function
    report = lower_dispatch(module, "cpu", None)
    module.verify()
    assert {e.decision.provider for e in report} == {"native"} and len(report) >= 1
    assert not [op for op in module.walk() if op.name.startswith("vllm.")]
    assert any(isinstance(op, CallOp) for op in module.walk())
    return before, evaluate(fn, *inputs), module


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
    if a.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        a, b = a.float(), b.float()
    assert torch.equal(a, b), (a - b).abs().max()


def _func(args: str, body: str, results: str) -> str:
    return f"func.func @f({args}) -> ({results}) {{\n{body}\n}}"


def _x(dtype: torch.dtype, h: int = H, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(T, h, generator=g) * 3).to(dtype)


def _check(text: str, *inputs: torch.Tensor) -> None:
    before, after, _ = _lower_and_run(text, *inputs)
    assert len(before) == len(after)
    for a, b in zip(before, after, strict=True):
        _same(a, b)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("variant", ["weight", "none", "f32_weight", "variance", "runtime_eps"])
def test_rms_norm(dt: str, variant: str) -> None:
    dtype = DTYPES[dt]
    t = f"tensor<?x{H}x{dt}>"
    wdt = "f32" if variant == "f32_weight" else dt
    w = (torch.rand(H) + 0.5).to(DTYPES[wdt])
    eps = torch.tensor(3e-7, dtype=torch.float64)
    weight = "" if variant == "none" else f" weight(%w : tensor<{H}x{wdt}>)"
    attrs = "{epsilon = 1.0e-06 : f64}"
    if variant == "variance":
        attrs = "{epsilon = 1.0e-05 : f64, variance_size = 24 : i64}"
    epsilon = ""
    if variant == "runtime_eps":
        attrs, epsilon = "", " epsilon(%e : tensor<f64>)"
    body = f"  %y = vllm.rms_norm %x{weight}{epsilon} {attrs} : {t} -> {t}\n  func.return %y : {t}"
    _check(_func(f"%x: {t}, %w: tensor<{H}x{wdt}>, %e: tensor<f64>", body, t), _x(dtype), w, eps)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("weight", ["same", "none", "f32"])
@pytest.mark.parametrize("rounded", [False, True])
def test_fused_add_rms_norm(dt: str, weight: str, rounded: bool) -> None:
    dtype = DTYPES[dt]
    t = f"tensor<?x{H}x{dt}>"
    wdt = "f32" if weight == "f32" else dt
    w = f" weight(%w : tensor<{H}x{wdt}>)" if weight != "none" else ""
    attrs = "{epsilon = 1.0e-05 : f64, rounded_sum}" if rounded else "{epsilon = 1.0e-05 : f64}"
    body = (f"  %o, %ro = vllm.fused_add_rms_norm %x, %r{w} {attrs} : {t}, {t}"
            f" -> {t}, {t}\n  func.return %o, %ro : {t}, {t}")
    _check(_func(f"%x: {t}, %r: {t}, %w: tensor<{H}x{wdt}>", body, f"{t}, {t}"),
           _x(dtype), _x(dtype, seed=1), (torch.rand(H) + 0.5).to(DTYPES[wdt]))


FP8 = {"f8E4M3FN": torch.float8_e4m3fn, "f8E4M3FNUZ": torch.float8_e4m3fnuz}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("fp8", FP8)
def test_unfused_fp8_quants(dt: str, fp8: str) -> None:
    t, q = f"tensor<?x{H}x{dt}>", f"tensor<?x{H}x{fp8}>"
    body = "\n".join([
        f"  %a = vllm.static_scaled_fp8_quant %x, %s : {t}, tensor<1xf32> -> {q}",
        f"  %b, %bs = vllm.dynamic_scaled_fp8_quant %x : {t} -> {q}, tensor<1xf32>",
        f"  %c, %cs = vllm.dynamic_per_token_scaled_fp8_quant %x : {t} -> {q}, tensor<?x1xf32>",
        f"  %d, %ds = vllm.dynamic_per_token_scaled_fp8_quant %x scale_ub(%u : tensor<1xf32>) : "
        f"{t} -> {q}, tensor<?x1xf32>",
        f"  func.return %a, %b, %bs, %c, %cs, %d, %ds : {q}, {q}, tensor<1xf32>, {q}, "
        "tensor<?x1xf32>, " f"{q}, tensor<?x1xf32>",
    ])
    results = f"{q}, {q}, tensor<1xf32>, {q}, tensor<?x1xf32>, {q}, tensor<?x1xf32>"
    x = _x(DTYPES[dt])
    x[3] = 0  # a zero row: the scale floor
    _check(_func(f"%x: {t}, %s: tensor<1xf32>, %u: tensor<1xf32>", body, results),
           x, torch.tensor([0.02]), torch.tensor([0.004]))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("options", [
    "{group_size = 16 : i64}",
    "{group_size = 32 : i64, column_major_scales = true}",
    "{group_size = 16 : i64, use_ue8m0 = true, eps = 1.0e-08 : f64}",
    "{group_size = 32 : i64, column_major_scales = true, use_ue8m0 = true}",
])
def test_per_token_group_fp8_quant(dt: str, options: str) -> None:
    g = 16 if "16" in options else 32
    t, q, s = f"tensor<?x{H}x{dt}>", f"tensor<?x{H}xf8E4M3FN>", f"tensor<?x{H // g}xf32>"
    body = (f"  %q, %s = vllm.per_token_group_fp8_quant %x {options} : {t} -> {q}, {s}\n"
            f"  func.return %q, %s : {q}, {s}")
    x = _x(DTYPES[dt])
    x[2, :g] = 0
    _check(_func(f"%x: {t}", body, f"{q}, {s}"), x)


@pytest.mark.parametrize("dt", DTYPES)
def test_int8_quants(dt: str) -> None:
    t, q = f"tensor<?x{H}x{dt}>", f"tensor<?x{H}xi8>"
    body = (f"  %a = vllm.static_scaled_int8_quant %x, %s : {t}, tensor<1xbf16> -> {q}\n"
            f"  %b, %bs = vllm.dynamic_per_token_scaled_int8_quant %x : {t} -> {q}, tensor<?x1xf32>\n"
            f"  func.return %a, %b, %bs : {q}, {q}, tensor<?x1xf32>")
    x = _x(DTYPES[dt])
    x[4] = 0  # a zero row: s = 0, q = 0
    _check(_func(f"%x: {t}, %s: tensor<1xbf16>", body, f"{q}, {q}, tensor<?x1xf32>"),
           x, torch.tensor([0.03], dtype=torch.bfloat16))


ACT_OPS = ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")


@pytest.mark.parametrize("op", ACT_OPS)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", ["?x64", "7x64"])
def test_act_and_mul(op: str, dt: str, shape: str) -> None:
    half = shape.replace("64", "32")
    t, o = f"tensor<{shape}x{dt}>", f"tensor<{half}x{dt}>"
    body = f"  %y = vllm.{op} %x : {t} -> {o}\n  func.return %y : {o}"
    _check(_func(f"%x: {t}", body, o), _x(DTYPES[dt]))


@pytest.mark.parametrize("op", ACT_OPS)
def test_act_and_mul_unknown_width_keeps_the_native_op(op: str) -> None:
    """The halves are the slices models write (`x[..., :d]`), whose bound is a size: with an
    unknown width the native cannot be spelled in torch.calls, so the op stays and export
    calls the native's torch op. The report says so, and the value is the native's."""
    t = "tensor<7x?xbf16>"
    module = _parse(_func(f"%x: {t}", f"  %y = vllm.{op} %x : {t} -> {t}\n"
                          f"  func.return %y : {t}", t))
    fn = next(o for o in module.walk() if isinstance(o, func.FuncOp))
    x = _x(torch.bfloat16)
    (before,) = evaluate(fn, x)
    report = lower_dispatch(module, "cpu", None)
    module.verify()
    (entry,) = list(report)
    assert entry.decision.provider == "native"
    assert any("kept as the native's torch op" in n for n in entry.notes), entry.notes
    assert [o.name for o in module.walk() if o.name.startswith("vllm.")] == [f"vllm.{op}"]
    (after,) = evaluate(fn, x)
    _same(before, after)


@pytest.mark.parametrize("op", ACT_OPS)
@pytest.mark.parametrize("dt", DTYPES)
def test_act_and_mul_two_operands(op: str, dt: str) -> None:
    t = f"tensor<?x{H}x{dt}>"
    body = f"  %y = vllm.{op} %x up(%u : {t}) : {t} -> {t}\n  func.return %y : {t}"
    _check(_func(f"%x: {t}, %u: {t}", body, t), _x(DTYPES[dt]), _x(DTYPES[dt]) * 0.5)


# Every scheme a fused op allows (OPS.md), as (attribute, q type, scales type or None).
SCHEMES = [
    ("static per_tensor", "f8E4M3FN", None),
    ("static per_tensor", "i8", None),
    ("dynamic per_token", "f8E4M3FNUZ", "tensor<?x1xf32>"),
    ("dynamic per_token", "i8", "tensor<?x1xf32>"),
    ("dynamic per_group 16", "f8E4M3FN", "tensor<?x4xf32>"),
    ("dynamic per_group 16 column_major ue8m0", "f8E4M3FN", "tensor<?x4xf32>"),
]


def _scheme_parts(scheme: str, scales: str | None, ub: bool) -> tuple[str, str, str]:
    """(scale/scale_ub operands, extra result type, extra result name)"""
    operands = " scale(%s : tensor<1xf32>)" if scales is None else ""
    if ub and scheme == "dynamic per_token":
        operands += " scale_ub(%u : tensor<1xf32>)"
    return operands, (f", {scales}" if scales else ""), (", %qs" if scales else "")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("scheme,qt,scales", SCHEMES)
@pytest.mark.parametrize("variant", ["default", "rounded_sum_f32_weight"])
def test_fused_norm_quant(dt: str, scheme: str, qt: str, scales: str | None, variant: str) -> None:
    t, q = f"tensor<?x{H}x{dt}>", f"tensor<?x{H}x{qt}>"
    operands, rtype, rname = _scheme_parts(scheme, scales, ub=qt != "i8")
    wdt = "f32" if variant != "default" else dt
    w = f" weight(%w : tensor<{H}x{wdt}>)"
    attrs = f"{{epsilon = 1.0e-06 : f64, scheme = #vllm.quant<{scheme}>}}"
    add_attrs = attrs if variant == "default" else attrs.replace("f64,", "f64, rounded_sum,")
    body = "\n".join([
        f"  %q{rname} = vllm.rms_norm_quant %x{w}{operands} {attrs} : {t} -> {q}{rtype}",
        f"  %f, %fr{rname.replace('qs', 'fs')} = vllm.fused_add_rms_norm_quant %x, %r{w}{operands} "
        f"{add_attrs} : {t}, {t} -> {q}, {t}{rtype}",
        f"  func.return %q{rname}, %f, %fr{rname.replace('qs', 'fs')} : {q}{rtype}, {q}, {t}{rtype}",
    ])
    args = f"%x: {t}, %r: {t}, %w: tensor<{H}x{wdt}>, %s: tensor<1xf32>, %u: tensor<1xf32>"
    dtype = DTYPES[dt]
    _check(_func(args, body, f"{q}{rtype}, {q}, {t}{rtype}"), _x(dtype), _x(dtype, seed=2),
           (torch.rand(H) + 0.5).to(DTYPES[wdt]), torch.tensor([0.01]), torch.tensor([0.003]))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("scheme,qt,scales", SCHEMES)
def test_silu_and_mul_quant(dt: str, scheme: str, qt: str, scales: str | None) -> None:
    t, q = f"tensor<?x{H}x{dt}>", f"tensor<?x{H // 2}x{qt}>"
    scales = scales and scales.replace("4x", "2x")
    operands, rtype, rname = _scheme_parts(scheme, scales, ub=False)
    body = (f"  %q{rname} = vllm.silu_and_mul_quant %x{operands} "
            f"{{scheme = #vllm.quant<{scheme}>}} : {t} -> {q}{rtype}\n"
            f"  func.return %q{rname} : {q}{rtype}")
    _check(_func(f"%x: {t}, %s: tensor<1xf32>", body, f"{q}{rtype}"), _x(DTYPES[dt]),
           torch.tensor([0.01]))


@pytest.mark.parametrize("op", ACT_OPS[1:])
@pytest.mark.parametrize("scheme,qt,scales", [SCHEMES[0], SCHEMES[3], SCHEMES[4]])
def test_act_and_mul_quant_two_operands(op: str, scheme: str, qt: str, scales: str | None) -> None:
    t, q = f"tensor<?x{H}xbf16>", f"tensor<?x{H}x{qt}>"
    operands, rtype, rname = _scheme_parts(scheme, scales, ub=False)
    body = (f"  %q{rname} = vllm.{op}_quant %x up(%g : {t}){operands} "
            f"{{scheme = #vllm.quant<{scheme}>}} : {t} -> {q}{rtype}\n"
            f"  func.return %q{rname} : {q}{rtype}")
    x = _x(torch.bfloat16)
    _check(_func(f"%x: {t}, %g: {t}, %s: tensor<1xf32>", body, f"{q}{rtype}"), x, x * 0.5,
           torch.tensor([0.01]))


def test_decomposition_matches_native_independently() -> None:
    """The evaluator is not comparing the native with itself: a lowered rms_norm must have
    no vllm op left, and its value equals ops.rms_norm.native computed directly."""
    t = f"tensor<?x{H}xbf16>"
    text = _func(f"%x: {t}", f"  %y = vllm.rms_norm %x {{epsilon = 1.0e-06 : f64}} : {t} -> {t}\n"
                 f"  func.return %y : {t}", t)
    x = _x(torch.bfloat16)
    _, (y,), module = _lower_and_run(text, x)
    targets = [op.target.data for op in module.walk() if isinstance(op, CallOp)]
    assert "aten::rsqrt.default" in targets and "aten::mean.dim" in targets
    assert torch.equal(y, ops.rms_norm.native(x, None, 1e-6))


def test_exported_decomposition_runs_as_fx() -> None:
    """The lowering exports to FX (backends/torch_export) and runs there exactly as well."""
    export = pytest.importorskip("vllm_xdsl.backends.torch_export")
    t, q = f"tensor<?x{H}xbf16>", f"tensor<?x{H}xf8E4M3FN>"
    text = _func(
        f"%x: {t}, %r: {t}, %w: tensor<{H}xbf16>",
        f"  %q, %res, %s = vllm.fused_add_rms_norm_quant %x, %r weight(%w : tensor<{H}xbf16>) "
        f"{{epsilon = 1.0e-06 : f64, scheme = #vllm.quant<dynamic per_group 16 column_major>}} : "
        f"{t}, {t} -> {q}, {t}, tensor<?x4xf32>\n"
        f"  func.return %q, %res, %s : {q}, {t}, tensor<?x4xf32>",
        f"{q}, {t}, tensor<?x4xf32>")
    inputs = (_x(torch.bfloat16), _x(torch.bfloat16, seed=3), torch.rand(H).to(torch.bfloat16))
    before, after, module = _lower_and_run(text, *inputs)
    gm = export.export_module(module)
    targets = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    assert not any("vllm_xdsl" in t for t in targets), targets  # plain aten/prims only
    out = gm(*inputs)
    out = list(out) if isinstance(out, tuple | list) else [out]
    for a, b in zip(before, out, strict=True):
        _same(a, b)


@pytest.mark.parametrize("column_major", [False, True])
def test_per_group_with_unknown_hidden_size(column_major: bool) -> None:
    t, q, s = "tensor<?x?xbf16>", "tensor<?x?xf8E4M3FN>", "tensor<?x?xf32>"
    cm = ", column_major_scales = true" if column_major else ""
    body = (f"  %q, %s = vllm.per_token_group_fp8_quant %x {{group_size = 16 : i64{cm}}} : "
            f"{t} -> {q}, {s}\n  func.return %q, %s : {q}, {s}")
    _check(_func(f"%x: {t}", body, f"{q}, {s}"), _x(torch.bfloat16))


def test_runtime_epsilon_as_f64_scalar() -> None:
    """A runtime epsilon may also be an f64 scalar value (a SymFloat in FX)."""
    t = f"tensor<?x{H}xf16>"
    body = (f"  %o, %ro = vllm.fused_add_rms_norm %x, %r epsilon(%e : f64) : {t}, {t} -> {t}, {t}\n"
            f"  func.return %o, %ro : {t}, {t}")
    _check(_func(f"%x: {t}, %r: {t}, %e: f64", body, f"{t}, {t}"),
           _x(torch.float16), _x(torch.float16, seed=4), 3e-7)


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_rounded_sum_is_one_add_in_the_input_dtype(dt: str) -> None:
    """With rounded_sum, residual_out = (x.float() + r.float()).to(dtype) is lowered as
    torch's own add in that dtype (as the input graph spells it): the same bits, on sums
    whose fp32 result itself rounds (exponents far apart), cancellations, ties, specials."""
    dtype, g = DTYPES[dt], torch.Generator().manual_seed(5)
    n = 1 << 14
    span = 60 if dtype == torch.bfloat16 else 14

    def wide() -> torch.Tensor:
        sign = torch.randint(0, 2, (n,), generator=g) * 2 - 1
        exp = torch.randint(-span, span, (n,), generator=g).float()
        return (sign * torch.rand(n, generator=g).add(1) * torch.exp2(exp)).to(dtype)

    x, r = wide(), wide()
    r[: n // 8] = -x[: n // 8]  # exact cancellation
    x[-4:] = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0]).to(dtype)
    r[-1] = -0.0
    t = f"tensor<?x{H}x{dt}>"
    body = (f"  %o, %ro = vllm.fused_add_rms_norm %x, %r {{epsilon = 1.0e-05 : f64, rounded_sum}}"
            f" : {t}, {t} -> {t}, {t}\n  func.return %o, %ro : {t}, {t}")
    before, after, module = _lower_and_run(_func(f"%x: {t}, %r: {t}", body, f"{t}, {t}"),
                                           x.view(-1, H), r.view(-1, H))
    adds = [[v.type for v in (*op.inputs, *op.results)] for op in module.walk()
            if isinstance(op, CallOp) and op.target.data == "aten::add.Tensor"
            and len(op.inputs) == 2]
    assert [str(types[-1]) for types in adds] == [t] and len(set(map(str, adds[0]))) == 1
    for a, b in zip(before, after, strict=True):
        assert torch.equal(a.isnan(), b.isnan())
        assert torch.equal(a.nan_to_num(), b.nan_to_num()) and torch.equal(a.signbit(), b.signbit())
