"""lower-dispatch from Python: the report, eager/compile consistency, in-place safety, errors.

Test providers are registered the way an out-of-tree package would (register_impl), in
fixtures that put the registry back afterwards. A test impl for provider "triton" or
"cuda" stands in for the real one so that its availability and argument checks are
under the test's control; the lowering asks the registry either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from helpers.evaluate import evaluate
from xdsl.dialects import func
from xdsl.parser import Parser

from vllm_xdsl import ops
from vllm_xdsl.dialects import make_context
from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.dialects.types import tensor_type
from vllm_xdsl.ops import DispatchError, DispatchReport
from vllm_xdsl.transforms.lowering.lower_dispatch import LowerDispatchPass, lower_dispatch


@pytest.fixture(autouse=True)
def _clean_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_XDSL_PRIORITY", raising=False)
    ops.set_priority(None)


def _parse(text: str):
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def _fn(module) -> func.FuncOp:
    return next(op for op in module.walk() if isinstance(op, func.FuncOp))


def _ir(t: torch.Tensor, dynamic_tokens: bool = True) -> str:
    shape = (None, *t.shape[1:]) if dynamic_tokens else tuple(t.shape)
    return str(tensor_type(t.dtype, shape))


@pytest.fixture
def swap_impl() -> Iterator[Any]:
    """swap_impl(op, provider, fn, **register_kwargs): register `fn` as `provider`'s impl of
    `op` for this test only (the real registration, if any, comes back afterwards)."""
    ops.registry.ensure_loaded()  # load real providers first: ours must not block them
    saved: list[tuple[ops.SemanticOp, str, Any]] = []

    def swap(op: ops.SemanticOp, provider: str, fn: Any, **kwargs: Any) -> Any:
        saved.append((op, provider, op._impls.pop(provider, None)))
        return op.register_impl(provider, **kwargs)(fn)

    yield swap
    for op, provider, old in reversed(saved):
        if old is None:
            op._impls.pop(provider, None)
        else:
            op._impls[provider] = old
    ops.registry.changed()


# --- a fake-but-correct "triton" silu_and_mul: bf16/f16 rows that are a multiple of 16 ----


def _fake_silu(x: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
    return ops.silu_and_mul.native(x, up)


def _fake_silu_args(x: ops.TensorMeta, up: ops.TensorMeta | None = None) -> bool | str:
    if x.dtype == torch.float32:
        return "test triton: no f32"
    if x.shape[-1] is None or x.shape[-1] % 32:
        return "test triton: rows must be a multiple of 32"
    return True


SILU_CASES = [(torch.bfloat16, 64), (torch.float16, 96), (torch.float32, 64), (torch.bfloat16, 40)]


@pytest.mark.parametrize("dtype,h", SILU_CASES)
@pytest.mark.parametrize("priority", ["silu_and_mul=triton,native", "triton"])
def test_eager_and_lowering_choose_the_same(swap_impl, dtype, h, priority) -> None:
    swap_impl(ops.silu_and_mul, "triton", _fake_silu, supported=True,
              supports_args=_fake_silu_args)
    x = torch.randn(5, h).to(dtype)
    with ops.priority(priority):
        eager = ops.silu_and_mul.explain(x)
        out = ops.silu_and_mul(x)  # eager dispatch runs the chosen impl
    module = _parse(f"func.func @f(%x: {_ir(x)}) -> {_ir(x[:, : h // 2])} {{\n"
                    f"  %y = vllm.silu_and_mul %x : {_ir(x)} -> {_ir(x[:, : h // 2])}\n"
                    f"  func.return %y : {_ir(x[:, : h // 2])}\n}}")
    (entry,) = lower_dispatch(module, "cpu", priority)  # eager on CPU tensors: target cpu
    assert entry.decision.provider == eager.provider
    assert entry.decision.rejected == eager.rejected
    expected = "triton" if dtype != torch.float32 and h % 32 == 0 else "native"
    assert eager.provider == expected
    lowered = [op.name for op in _fn(module).body.block.ops]
    assert ("triton.silu_and_mul" in lowered) == (expected == "triton")
    (y,) = evaluate(_fn(module), x)
    assert torch.equal(y, out) and torch.equal(y, ops.silu_and_mul.native(x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("runtime_eps", [False, True])
def test_real_triton_rms_norm_consistent(monkeypatch, dtype, runtime_eps) -> None:
    """The real Triton registration: eager (CPU tensors, interpreter) and the lowering for
    target cpu agree, including a runtime epsilon (eager: the 0-d f64 tensor Dynamo passes;
    IR: an epsilon operand)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ops.registry.ensure_loaded()
    if "triton" not in ops.rms_norm.impls():
        pytest.skip("no triton provider registered")
    x, w = torch.randn(3, 64).to(dtype), torch.ones(64, dtype=dtype)
    eps = torch.tensor(1e-6, dtype=torch.float64) if runtime_eps else 1e-6
    with ops.priority("rms_norm=triton,native"):
        eager = ops.rms_norm.explain(x, w, eps)
    eps_ir = " epsilon(%e : tensor<f64>)" if runtime_eps else ""
    attrs = "" if runtime_eps else " {epsilon = 1.0e-06 : f64}"
    module = _parse(
        f"func.func @f(%x: {_ir(x)}, %w: {_ir(w, False)}, %e: tensor<f64>) -> {_ir(x)} {{\n"
        f"  %y = vllm.rms_norm %x weight(%w : {_ir(w, False)}){eps_ir}{attrs} : {_ir(x)} -> {_ir(x)}\n"
        f"  func.return %y : {_ir(x)}\n}}")
    (entry,) = lower_dispatch(module, "cpu", "rms_norm=triton,native")
    assert (entry.decision.provider, entry.decision.rejected) == (eager.provider, eager.rejected)


def test_runtime_epsilon_reaches_supports_args_as_tensor_meta(swap_impl) -> None:
    seen: list[Any] = []

    def args(x, weight, epsilon, variance_size):
        seen.append(epsilon)
        return True

    swap_impl(ops.rms_norm, "triton", lambda x, weight, epsilon, variance_size=None: x,
              supported=True, supports_args=args)
    module = _parse("func.func @f(%x: tensor<?x64xf16>, %e: tensor<f64>) -> tensor<?x64xf16> {\n"
                    "  %y = vllm.rms_norm %x epsilon(%e : tensor<f64>) : tensor<?x64xf16> -> "
                    "tensor<?x64xf16>\n  func.return %y : tensor<?x64xf16>\n}")
    lower_dispatch(module, "cuda", "rms_norm=triton")
    assert seen == [ops.TensorMeta(torch.float64, (), "cuda")]


# --- the report ----------------------------------------------------------------------------

LAYER = """
func.func @layer(%x: tensor<?x64xbf16>, %r: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x32xbf16>) {
  %y = vllm.rms_norm %x weight(%w : tensor<64xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  %o, %ro = vllm.fused_add_rms_norm %y, %r weight(%w : tensor<64xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x64xbf16>, tensor<?x64xbf16> -> tensor<?x64xbf16>, tensor<?x64xbf16>
  %m = vllm.silu_and_mul %o : tensor<?x64xbf16> -> tensor<?x32xbf16>
  func.return %o, %ro, %m : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x32xbf16>
}
"""


def test_report_is_python_readable(swap_impl) -> None:
    swap_impl(ops.silu_and_mul, "cuda", _fake_silu, supported="test cuda: switched off")
    module = _parse(LAYER)
    report = lower_dispatch(module, "cuda", "silu_and_mul=cuda,triton,native")
    assert isinstance(report, DispatchReport)
    nodes = {e.node: e for e in report}
    assert list(nodes) == ["@layer %y", "@layer %o", "@layer %m"]
    silu = nodes["@layer %m"].decision
    assert silu.op == "silu_and_mul" and silu.provider == "triton"
    assert silu.rejected == [("cuda", "test cuda: switched off")]
    text = report.format()
    assert "@layer %m: silu_and_mul -> triton" in text
    assert "    rejected cuda: test cuda: switched off" in text


def test_pass_prints_report_to_stderr(capsys) -> None:
    module = _parse(LAYER)
    LowerDispatchPass(target="cpu", report=True).apply(make_context(), module)
    err = capsys.readouterr().err
    assert err.splitlines()[:4] == ["dispatch report: 3 node(s)", "@layer %y: rms_norm -> native",
                                    "@layer %o: fused_add_rms_norm -> native",
                                    "@layer %m: silu_and_mul -> native"]
    LowerDispatchPass(target="cpu").apply(make_context(), _parse(LAYER))
    assert capsys.readouterr().err == ""


def test_module_attribute_sets_the_default_target() -> None:
    module = _parse('builtin.module attributes {vllm.target = "cpu"} {' + LAYER + "}")
    assert {e.decision.provider for e in lower_dispatch(module)} == {"native"}
    assert not [op for op in module.walk() if op.name.split(".")[0] in ("vllm", "cuda")]


# --- providers without an IR dialect, and errors ------------------------------------------


def test_provider_without_dialect_is_called_at_run_time(swap_impl) -> None:
    """An out-of-tree provider has no dialect: a one-bucket auto.<op> calls it at run time,
    so the compiled graph runs the implementation eager dispatch would pick."""
    from vllm_xdsl.backends.torch_export import export_module

    calls = []

    def acme_silu(x: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
        calls.append(tuple(x.shape))
        return ops.silu_and_mul.native(x, up)

    swap_impl(ops.silu_and_mul, "acme", acme_silu)
    for priority in ("silu_and_mul=acme,native", "silu_and_mul=acme!"):
        module = _parse(LAYER)
        report = lower_dispatch(module, "cpu", priority)
        (silu,) = [e for e in report if e.decision.op == "silu_and_mul"]
        assert silu.decision.provider == "acme"
        assert silu.notes == ("acme has no IR dialect: auto.silu_and_mul calls it at run time",)
        [auto] = [op for op in module.walk() if op.name == "auto.silu_and_mul"]
        assert auto.table() == ([1], ["acme"])
    x, r = torch.randn(2, 5, 64, dtype=torch.bfloat16)
    w = torch.randn(64, dtype=torch.bfloat16)
    graph = export_module(module)
    out, res, m = graph(x, r, w)
    assert calls == [(5, 64)]
    o_ref, _ = ops.fused_add_rms_norm.native(ops.rms_norm.native(x, w, 1e-5), r, w, 1e-6)
    torch.testing.assert_close(m, ops.silu_and_mul.native(o_ref), rtol=0, atol=0)


@pytest.mark.parametrize("target,priority,message", [
    ("tpu", None, "lower-dispatch: unknown target 'tpu' (expected one of cuda, rocm, cpu)"),
    ("cpu", "rms_norm=triton;rms_norm=native",
     "lower-dispatch: option 'priority': bad priority 'rms_norm=triton;rms_norm=native': "
     "op 'rms_norm' listed twice"),
    # The option's error, not the first node's that uses it.
    ("cpu", "rms_norm=nope",
     "lower-dispatch: option 'priority': unknown provider 'nope' (known: cpu, cuda, native, "),
])
def test_errors_are_one_clear_line(target, priority, message) -> None:
    with pytest.raises(DispatchError) as info:
        lower_dispatch(_parse(LAYER), target, priority)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    assert not getattr(info.value, "__notes__", None)  # no module dump attached


def test_an_unknown_provider_is_found_before_any_op_is_lowered() -> None:
    """Also one that only a later op's list reaches: the module is left as it was."""
    module = _parse(LAYER)
    before = str(module)
    with pytest.raises(DispatchError, match=r"^lower-dispatch: option 'priority': unknown "
                       r"provider 'nope' \(known: .*\bnative\b.*\)$"):
        lower_dispatch(module, "cpu", "rms_norm=native;silu_and_mul=nope")
    assert str(module) == before


def test_the_pass_rejects_a_bad_priority_when_it_is_made() -> None:
    with pytest.raises(ValueError, match=r"^option 'priority': unknown provider 'nope' "):
        LowerDispatchPass(priority="native,nope")
    with pytest.raises(ValueError, match=r"^unknown target 'tpu' "):
        LowerDispatchPass(target="tpu")
    LowerDispatchPass(target="cpu", priority="rms_norm=triton,native")  # fine ones are


def test_an_unknown_provider_in_the_environment_names_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "rms_norm=nope")
    module = _parse(LAYER)
    before = str(module)
    with pytest.raises(DispatchError, match=r"^lower-dispatch: VLLM_XDSL_PRIORITY: unknown "
                       r"provider 'nope' \(known: "):
        lower_dispatch(module, "cpu")
    assert str(module) == before


def test_forced_impl_that_rejects_the_arguments(swap_impl) -> None:
    swap_impl(ops.silu_and_mul, "triton", _fake_silu, supports_args=_fake_silu_args)
    module = _parse(LAYER.replace("bf16", "f32"))
    with pytest.raises(DispatchError, match=r"^@layer %m: silu_and_mul: implementation "
                       r"silu_and_mul:triton is forced by priority \(explicit\) but cannot run: "
                       r"test triton: no f32$"):
        lower_dispatch(module, "cuda", "silu_and_mul=triton!")


# --- in-place safety -------------------------------------------------------------------------


def _inplace_fused_add(x, residual, weight, epsilon, rounded_sum=False):
    """A correct in-place kernel: out into x, residual_out into residual."""
    out, res = ops.fused_add_rms_norm.native(x, residual, weight, epsilon, rounded_sum)
    x.copy_(out)
    residual.copy_(res)
    return x, residual


CHAIN = """
func.func @chain(%x: tensor<?x64xf32>, %r: tensor<?x64xf32>, %w: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %a = torch.call "aten::mul.Tensor"(%x, %x) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %o, %ro = vllm.fused_add_rms_norm %a, %r weight(%w : tensor<64xf32>) {epsilon = 1.0e-06 : f64} : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>, tensor<?x64xf32>
  %o2, %ro2 = vllm.fused_add_rms_norm %o, %ro weight(%w : tensor<64xf32>) {epsilon = 1.0e-05 : f64} : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>, tensor<?x64xf32>
  func.return %o2, %ro2, %o : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
}
"""


def test_inplace_impl_never_modifies_caller_tensors(swap_impl) -> None:
    swap_impl(ops.fused_add_rms_norm, "cuda", _inplace_fused_add, inplace=True)
    module = _parse(CHAIN)
    fn = _fn(module)
    x, r, w = torch.randn(4, 64), torch.randn(4, 64), torch.rand(64) + 0.5
    expected = evaluate(fn, x, r, w)  # before lowering: the natives
    report = lower_dispatch(module, "cuda")
    assert [e.decision.provider for e in report] == ["cuda", "cuda"]
    first, second = (e.notes for e in report)
    # %a is fresh and used once: overwritten. %r belongs to the caller: copied.
    assert first == ("in place: overwrites x (its only use)",
                     "copied residual for the in-place kernel: it is a function argument "
                     "(the caller still owns it)")
    # %o is also returned: copied; %ro is used only here: overwritten.
    assert second == ("copied x for the in-place kernel: it has another use",
                      "in place: overwrites residual (its only use)")
    clones = [op for op in fn.body.block.ops
              if isinstance(op, CallOp) and op.target.data == "aten::clone.default"]
    assert len(clones) == 2
    saved = (x.clone(), r.clone(), w.clone())
    got = evaluate(fn, x, r, w)
    for a, b in zip((x, r, w), saved, strict=True):
        assert torch.equal(a, b), "a caller-visible input was modified"
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a, b)


def test_without_the_proof_the_inplace_kernel_would_corrupt(swap_impl) -> None:
    """The test above can fail: the same kernel run on the caller's tensors changes them."""
    x, r, w = torch.randn(4, 64), torch.randn(4, 64), torch.rand(64) + 0.5
    saved = r.clone()
    _inplace_fused_add(x.clone(), r, w, 1e-6)
    assert not torch.equal(r, saved)


def test_out_of_place_impl_gets_inplace_variant_only_when_proven(swap_impl) -> None:
    swap_impl(ops.rms_norm, "rocm", ops.rms_norm.native)
    module = _parse("""
func.func @g(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %a = torch.call "aten::neg.default"(%x) [#torch.operand<0>] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %y = vllm.rms_norm %a {epsilon = 1.0e-06 : f64} : tensor<?x64xf32> -> tensor<?x64xf32>
  %z = vllm.rms_norm %x {epsilon = 1.0e-06 : f64} : tensor<?x64xf32> -> tensor<?x64xf32>
  func.return %y, %z : tensor<?x64xf32>, tensor<?x64xf32>
}""")
    report = lower_dispatch(module, "rocm", "rms_norm=rocm!")
    ops_ = [op for op in _fn(module).body.block.ops if op.name == "rocm.rms_norm"]
    assert [op.properties.get("inplace") is not None for op in ops_] == [True, False]
    assert [e.notes for e in report] == [
        ("in place: overwrites x (its only use)",),
        ("out of place: x: it is a function argument (the caller still owns it)",),
    ]


# --- what supports_args sees: the same from IR types as from tensors ----------------------

_X, _R, _W = torch.zeros(7, 64, dtype=torch.bfloat16), torch.zeros(7, 64, dtype=torch.bfloat16), \
    torch.zeros(64, dtype=torch.bfloat16)
_S = torch.zeros(1)
_ARGS_CASES = [
    ("%y = vllm.rms_norm %x weight(%w : tensor<64xbf16>) {epsilon = 1.0e-05 : f64, "
     "variance_size = 32 : i64} : tensor<7x64xbf16> -> tensor<7x64xbf16>",
     "rms_norm", (_X, _W, 1e-5, 32)),
    ("%y, %z = vllm.fused_add_rms_norm %x, %r {epsilon = 1.0e-06 : f64} : tensor<7x64xbf16>, "
     "tensor<7x64xbf16> -> tensor<7x64xbf16>, tensor<7x64xbf16>",
     "fused_add_rms_norm", (_X, _R, None, 1e-6)),
    ("%y = vllm.static_scaled_fp8_quant %x, %s : tensor<7x64xbf16>, tensor<1xf32> -> "
     "tensor<7x64xf8E4M3FNUZ>", "static_scaled_fp8_quant", (_X, _S, torch.float8_e4m3fnuz)),
    ("%y, %z = vllm.dynamic_per_token_scaled_fp8_quant %x scale_ub(%s : tensor<1xf32>) : "
     "tensor<7x64xbf16> -> tensor<7x64xf8E4M3FN>, tensor<7x1xf32>",
     "dynamic_per_token_scaled_fp8_quant", (_X, _S)),
    ("%y, %z = vllm.per_token_group_fp8_quant %x {group_size = 16 : i64, use_ue8m0 = true, "
     "eps = 1.0e-08 : f64} : tensor<7x64xbf16> -> tensor<7x64xf8E4M3FN>, tensor<7x4xf32>",
     "per_token_group_fp8_quant", (_X, 16, False, True, 1e-8)),
    ("%y, %z = vllm.dynamic_per_token_scaled_int8_quant %x : tensor<7x64xbf16> -> "
     "tensor<7x64xi8>, tensor<7x1xf32>", "dynamic_per_token_scaled_int8_quant", (_X,)),
    ("%y, %z = vllm.rms_norm_quant %x weight(%w : tensor<64xbf16>) {epsilon = 1.0e-06 : f64, "
     "scheme = #vllm.quant<dynamic per_group 16 column_major>} : tensor<7x64xbf16> -> "
     "tensor<7x64xf8E4M3FN>, tensor<7x4xf32>", "rms_norm_quant",
     (_X, _W, 1e-6, None, None, torch.float8_e4m3fn, False, "group", 16, True)),
    ("%y, %z = vllm.fused_add_rms_norm_quant %x, %r scale(%s : tensor<1xf32>) {epsilon = "
     "1.0e-06 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<7x64xbf16>, "
     "tensor<7x64xbf16> -> tensor<7x64xi8>, tensor<7x64xbf16>", "fused_add_rms_norm_quant",
     (_X, _R, None, 1e-6, _S, None, torch.int8, True, "tensor")),
    ("%y, %z = vllm.silu_and_mul_quant %x {scheme = #vllm.quant<dynamic per_token>} : "
     "tensor<7x64xbf16> -> tensor<7x32xf8E4M3FN>, tensor<7x1xf32>", "silu_and_mul_quant",
     (_X, None, None, torch.float8_e4m3fn, False, "token")),
]


@pytest.mark.parametrize("line,name,eager_args", _ARGS_CASES, ids=[c[1] for c in _ARGS_CASES])
def test_ir_metadata_equals_eager_metadata(line, name, eager_args) -> None:
    from vllm_xdsl.transforms.lowering.meta_args import meta_args

    args = "%x: tensor<7x64xbf16>, %r: tensor<7x64xbf16>, %w: tensor<64xbf16>, %s: tensor<1xf32>"
    module = _parse(f"func.func @f({args}) {{\n  {line}\n  func.return\n}}")
    (op,) = [o for o in _fn(module).body.block.ops if o.name.startswith("vllm.")]
    from_ir = ops.meta_args(name, meta_args(op, "cpu"))
    assert from_ir == ops.meta_args(name, eager_args)


def test_availability_at_lowering_is_about_the_target(swap_impl) -> None:
    """`supported(target)`: can the impl serve that target (toolchain), not: is there a GPU
    here. A zero-argument `supported` can only speak for this machine, and is believed."""
    asked: list[str | None] = []

    def for_target(target: str | None = None) -> bool | str:
        asked.append(target)
        return target == "cuda" or f"test cuda: serves cuda, not {target}"

    swap_impl(ops.silu_and_mul, "cuda", _fake_silu, supported=for_target)
    swap_impl(ops.rms_norm, "cuda", ops.rms_norm.native, supported=lambda: "test: no GPU here")
    x = torch.randn(2, 64)
    with ops.priority("cuda,native"):
        assert ops.silu_and_mul.explain(x).rejected == [("cuda", "test cuda: serves cuda, not cpu")]
    report = lower_dispatch(_parse(LAYER.replace("bf16", "f32")), "cuda", "cuda,native")
    got = {e.decision.op: (e.decision.provider, e.decision.rejected) for e in report}
    assert got["silu_and_mul"] == ("cuda", [])
    assert got["rms_norm"] == ("native", [("cuda", "test: no GPU here")])
    (entry,) = [e for e in lower_dispatch(_parse(LAYER), "rocm", "cuda,native")
                if e.decision.op == "silu_and_mul"]
    assert entry.decision.rejected == [("cuda", "test cuda: serves cuda, not rocm")]
    assert asked == ["cpu", "cuda", "rocm"]  # asked once per target


def test_environment_priority_applies_to_lowering(swap_impl, monkeypatch) -> None:
    swap_impl(ops.silu_and_mul, "triton", _fake_silu, supports_args=_fake_silu_args)
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "silu_and_mul=triton,native")
    report = lower_dispatch(_parse(LAYER), "cpu")
    assert [e.decision.provider for e in report] == ["native", "native", "triton"]
    # An explicit priority wins over the environment.
    report = lower_dispatch(_parse(LAYER), "cpu", "silu_and_mul=native")
    assert [e.decision.provider for e in report] == ["native", "native", "native"]


def test_report_names_nodes_as_the_printer_does() -> None:
    """xDSL drops numeric suffixes from name hints; the report still says %y_1, as printed."""
    module = _parse("""
func.func @f(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %y = vllm.rms_norm %x {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  %y_1 = vllm.rms_norm %y {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return %y_1 : tensor<?x64xbf16>
}
""")
    assert [r.name_hint for op in module.walk() for r in op.results if op.name == "vllm.rms_norm"] \
        == ["y", "y"]
    assert [e.node for e in lower_dispatch(module, "cpu")] == ["@f %y", "@f %y_1"]
