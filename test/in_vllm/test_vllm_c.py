"""Provider `vllm_c`: vLLM's own `torch.ops._C` kernels as implementations of our ops,
registered through the `vllm_xdsl.providers` entry point, verified against our contract,
refused where they compute another function (bf16 on a CPU whose kernels truncate), and
called at run time from a lowered graph. Needs vLLM (the vLLM test environment). vLLM loads
one of its kernel libraries by the CPU (`_C`, `_C_AVX512`, `_C_AVX2`), which round to bf16
differently, so the bf16 tests measure what this machine's does and check the provider
against that."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

import torch  # noqa: E402

from vllm_xdsl import ops, verify  # noqa: E402
from vllm_xdsl.backends import vllm_c  # noqa: E402
from vllm_xdsl.backends.vllm_c import kernels  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BF16 = torch.bfloat16
ACTS = ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")


@pytest.fixture(scope="module", autouse=True)
def registered() -> None:
    vllm_c.register()  # what the entry point does (idempotent if it already ran)
    assert kernels.load() is None


def _truncated(f: torch.Tensor) -> torch.Tensor:
    """f32 -> bf16 by dropping the low 16 bits (rounding toward zero)."""
    return (f.view(torch.int32) & -65536).view(torch.float32).to(BF16)


SCRIPT = r"""
import json, sys
from vllm_xdsl import ops
providers = ops.registry.registered_providers()
print(json.dumps({"has": "vllm_c" in providers, "errors": ops.registry.load_errors(),
                  "vllm_imported": "vllm" in sys.modules}))
"""


def test_registered_through_the_entry_point(tmp_path: Path) -> None:
    """pyproject declares the entry point; the registry loads it without importing vLLM
    (its kernels load on the first availability check). Where the installed distribution
    predates the line, a dist-info holding just that entry point stands in for it."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split('[project.entry-points."vllm_xdsl.providers"]\n', 1)[1].split("\n[", 1)[0]
    assert 'vllm_c = "vllm_xdsl.backends.vllm_c:register"' in section
    from importlib.metadata import entry_points

    env = dict(os.environ)
    if not any(ep.name == "vllm_c" for ep in entry_points(group="vllm_xdsl.providers")):
        info = tmp_path / "vllm_xdsl_vllm_c_ep-0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-xdsl-vllm-c-ep\n"
                                       "Version: 0\n")
        (info / "entry_points.txt").write_text(
            "[vllm_xdsl.providers]\nvllm_c = vllm_xdsl.backends.vllm_c:register\n")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    env.pop("VLLM_XDSL_PRIORITY", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r == {"has": True, "errors": [], "vllm_imported": False}


def _truncating() -> bool:
    return kernels.bf16_problem() == kernels.BF16_TRUNCATES


def test_bf16_rounding_is_measured() -> None:
    """The measurement behind the bf16 decision: each float-output kernel's bf16 result is
    its f32 result rounded once, either truncated (then it differs from round-to-nearest-
    even, what the contract's `.to(bf16)` does, on about half of the values, and the
    provider refuses bf16) or rounded to nearest even (then it is accepted) - the same way
    for every kernel, and as bf16_problem() measured it."""
    assert kernels.bf16_problem() in (None, kernels.BF16_TRUNCATES)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 1024, generator=g).to(BF16)
    w = torch.randn(512, generator=g).to(BF16)
    xf, h = x.float(), 512
    refs = {
        "silu_and_mul": torch.nn.functional.silu(xf[:, :h]) * xf[:, h:],
        "gelu_and_mul": torch.nn.functional.gelu(xf[:, :h]) * xf[:, h:],
        "gelu_tanh_and_mul": torch.nn.functional.gelu(xf[:, :h], approximate="tanh") * xf[:, h:],
    }
    outs = {}
    for name, ref in refs.items():
        out = torch.empty(64, h, dtype=BF16)
        getattr(torch.ops._C, name)(out, x)
        outs[name] = (out, ref)
    xs = x[:, :h].contiguous()
    out = torch.empty_like(xs)
    torch.ops._C.rms_norm(out, xs, w, 1e-6)
    y = xs.float() * torch.rsqrt(xs.float().pow(2).mean(-1, keepdim=True) + 1e-6)
    outs["rms_norm"] = (out, y * w.float())
    rounded = _truncated if _truncating() else (lambda f: f.to(BF16))
    for name, (out, ref) in outs.items():
        assert (out == rounded(ref)).float().mean() > 0.999, name
        if _truncating():
            assert (out == ref.to(BF16)).float().mean() < 0.6, name


TRUNCATING = r"""
import torch
try:
    import vllm._C_AVX512  # registers torch.ops._C (its module init is not Python's)
except ImportError as e:
    if "module export function" not in str(e):
        raise
from vllm_xdsl.backends.vllm_c import kernels
kernels._load_result[:] = [None]  # loaded by hand: not the library vLLM picks here
print(kernels.bf16_problem())
"""


def test_the_truncating_library_is_found_and_refused_in_bf16() -> None:
    """`_C_AVX512`, what vLLM loads on an AVX-512 CPU without AVX512-BF16, truncates: loaded
    by hand in a fresh process (whatever this CPU makes vLLM load), the measurement finds it,
    and bf16 is refused with that reason."""
    if not torch.cpu._is_avx512_supported():
        pytest.skip("this CPU cannot run vLLM's AVX-512 kernels")
    proc = subprocess.run([sys.executable, "-c", TRUNCATING], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == kernels.BF16_TRUNCATES


def test_verify_runs_and_names_the_differences(capsys: pytest.CaptureFixture[str]) -> None:
    """`verify --provider vllm_c`: f16/f32 rows pass the contract, bf16 rows of the float
    kernels are refused with the truncation named where the kernels truncate (else they
    pass), the int8 quants pass in every dtype."""
    assert verify.main(["--provider", "vllm_c"]) == 0
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        parts = line.split(None, 4)
        if len(parts) == 5 and parts[1] == "vllm_c":
            rows[(parts[0], parts[2])] = (parts[3], parts[4])
    floats = ("rms_norm", "fused_add_rms_norm", *ACTS)
    int8 = ("static_scaled_int8_quant", "dynamic_per_token_scaled_int8_quant")
    assert {op for op, _ in rows} == {*floats, *int8}
    for (op, dtype), (status, detail) in rows.items():
        if op in floats and dtype == "bfloat16" and _truncating():
            assert status == "SKIP" and "truncation" in detail, (op, detail)
        else:
            assert status == "PASS", (op, dtype, detail)


def test_dispatch_picks_it_only_where_it_computes_the_contract() -> None:
    with ops.priority("vllm_c,native"):
        x, w = torch.randn(5, 256), torch.randn(256)
        d = ops.rms_norm.explain(x, w, 1e-6)
        assert d.provider == "vllm_c"
        torch.testing.assert_close(ops.rms_norm(x, w, 1e-6), ops.rms_norm.native(x, w, 1e-6))
        d = ops.rms_norm.explain(x.to(BF16), w.to(BF16), 1e-6)
        u = torch.randn(3, 4, 128, dtype=BF16)
        if _truncating():
            assert d.provider == "native"
            assert d.rejected == [("vllm_c", kernels.BF16_TRUNCATES)]
            assert ops.silu_and_mul.explain(u).provider == "native"
        else:
            assert d.provider == "vllm_c" and ops.silu_and_mul.explain(u).provider == "vllm_c"
        q, s = ops.dynamic_per_token_scaled_int8_quant(u)
        assert ops.dynamic_per_token_scaled_int8_quant.explain(u).provider == "vllm_c"
        eq, es = ops.dynamic_per_token_scaled_int8_quant.native(u)
        assert torch.equal(s, es) and (q.int() - eq.int()).abs().max() <= 1


def test_zero_rows_of_the_dynamic_int8_kernel() -> None:
    """vLLM's kernel wrote -128 for an all-zero row (0 times 1/0) on one machine measured,
    0 on another; the contract says 0, and the wrapper zeroes those rows."""
    x = torch.randn(3, 64)
    x[1] = 0
    q, s = torch.empty(3, 64, dtype=torch.int8), torch.empty(3, 1)
    torch.ops._C.dynamic_scaled_int8_quant(q, x, s, None)
    assert s[1].item() == 0 and ((q[1] == -128).all() or (q[1] == 0).all())
    q, s = kernels.dynamic_per_token_scaled_int8_quant(x)
    eq, es = ops.dynamic_per_token_scaled_int8_quant.native(x)
    assert torch.equal(q, eq) and torch.equal(s, es)


def test_static_int8_zero_point_and_shapes() -> None:
    x = torch.randn(2, 3, 64, dtype=BF16)
    scale = torch.tensor([0.02])
    zp = torch.tensor([3.0], dtype=BF16)
    for z in (None, zp):
        got = kernels.static_scaled_int8_quant(x, scale, z)
        assert torch.equal(got, ops.static_scaled_int8_quant.native(x, scale, z))
    half = torch.tensor([0.5], dtype=BF16)  # not an int32: computed by the contract
    assert torch.equal(kernels.static_scaled_int8_quant(x, scale, half),
                       ops.static_scaled_int8_quant.native(x, scale, half))


def test_lowered_graph_calls_it_at_run_time() -> None:
    """lower-dispatch has no vllm_c dialect: the op becomes auto.<op>, which calls the
    registered wrapper when the exported graph runs (eager kernels, no IR lowering)."""
    from xdsl.parser import Parser

    from vllm_xdsl.backends.torch_export import export_module
    from vllm_xdsl.dialects import make_context
    from vllm_xdsl.transforms.lowering.lower_dispatch import lower_dispatch

    text = """
func.func @f(%x: tensor<?x128xf32>, %w: tensor<128xf32>, %u: tensor<?x256xf32>)
    -> (tensor<?x128xf32>, tensor<?x128xf32>) {
  %n = vllm.rms_norm %x weight(%w : tensor<128xf32>) {epsilon = 1.0e-06 : f64} : tensor<?x128xf32> -> tensor<?x128xf32>
  %m = vllm.silu_and_mul %u : tensor<?x256xf32> -> tensor<?x128xf32>
  func.return %n, %m : tensor<?x128xf32>, tensor<?x128xf32>
}
"""
    module = Parser(make_context(), text).parse_module()
    report = lower_dispatch(module, "cpu", "rms_norm=vllm_c!;silu_and_mul=vllm_c!")
    assert {e.decision.provider for e in report} == {"vllm_c"}
    assert sorted(op.name for op in module.walk() if op.name.startswith("auto.")) == [
        "auto.rms_norm", "auto.silu_and_mul"]
    x, w, u = torch.randn(7, 128), torch.randn(128), torch.randn(7, 256)
    n, m = export_module(module)(x, w, u)
    xs = x.contiguous()
    expected = torch.empty_like(xs)
    torch.ops._C.rms_norm(expected, xs, w, 1e-6)
    assert torch.equal(n, expected)
    assert torch.equal(m, kernels.silu_and_mul(u))


def test_auto_measures_it_only_where_it_passes() -> None:
    """`auto` candidates: vllm_c in f32 (verified above); in bf16 only where its kernels
    round to nearest (else left out with the reason)."""
    from vllm_xdsl.ops.dispatch import meta_args
    from vllm_xdsl.ops.policy import parse_priority
    from vllm_xdsl.tune.auto import eligible

    choices = parse_priority("auto").for_op("silu_and_mul")
    assert choices is not None
    for dtype, picked in ((torch.float32, True), (BF16, not _truncating())):
        meta = meta_args(ops.silu_and_mul, (torch.randn(4, 256, dtype=dtype),))
        candidates, rejected = eligible(ops.silu_and_mul, meta, choices, "test", "cpu")
        names = {c.impl.provider for c in candidates}
        assert ("vllm_c" in names) is picked, (dtype, names)
        if not picked:
            assert ("vllm_c", kernels.BF16_TRUNCATES) in rejected
