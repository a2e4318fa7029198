"""gelu_and_mul_sparse (vLLM IR's Gemma-3n op), added through the core catalog: its native
against vLLM's own formula and an explicit-rounding reference, its sparsity, and the traced
native lowering of lower-dispatch."""

from __future__ import annotations

import math
import statistics

import pytest
import torch
import torch.nn.functional as F
import vllm_standins
from helpers.evaluate import evaluate
from helpers.raised import raised_native
from xdsl.dialects import func
from xdsl.parser import Parser

from vllm_xdsl import ops
from vllm_xdsl.core import catalog
from vllm_xdsl.dialects import make_context
from vllm_xdsl.ops.tolerance import contract_error
from vllm_xdsl.transforms.lowering.lower_dispatch import lower_dispatch

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
# vLLM's GeluAndMulSparse(activation_sparsity=0.95): Normal(0, 1).icdf(0.95).
STD_95 = statistics.NormalDist().inv_cdf(0.95)


def _x(dtype: torch.dtype, t: int = 17, d: int = 256, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(t, 2 * d, generator=g) * 2).to(dtype)


# vllm/ir/ops/activation.py (vLLM 0.32) as written there, the contract this op follows.
_vllm_native = vllm_standins.ir_gelu_and_mul_sparse


def _reference(x: torch.Tensor, m: float, approximate: str) -> torch.Tensor:
    """Row by row in f64, rounded to x's dtype at each of the native's op boundaries."""
    dt = x.dtype
    out = []
    for row in x.double():
        d = row.numel() // 2
        gate, up = row[:d], row[d:]

        def r(v: float | torch.Tensor) -> torch.Tensor:
            return torch.as_tensor(v, dtype=torch.float64).to(dt).double()

        mean = r(sum(gate.tolist()) / d)
        std = r(math.sqrt(sum((g - gate.mean().item()) ** 2 for g in gate.tolist()) / d))
        cutoff = r(mean + r(std * m))
        sparse = r(gate - cutoff).clamp(min=0)
        act = r(F.gelu(sparse, approximate=approximate))
        out.append(r(act * up))
    return torch.stack(out).to(dt)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dt", DTYPES)
def test_native_is_vllm_native_bit_for_bit(dt: str, approximate: str) -> None:
    x = _x(DTYPES[dt])
    got = ops.gelu_and_mul_sparse.native(x, STD_95, approximate)
    assert torch.equal(got, _vllm_native(x, STD_95, approximate))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dt", DTYPES)
def test_native_within_tolerance_of_reference(dt: str, approximate: str) -> None:
    x = _x(DTYPES[dt], t=7, d=64, seed=1)
    got = ops.gelu_and_mul_sparse.native(x, STD_95, approximate)
    want = _reference(x, STD_95, approximate)
    assert got.dtype == want.dtype and got.shape == (7, 64)
    assert contract_error(got, want) is None, contract_error(got, want)


def test_sparsity_matches_the_target() -> None:
    x = _x(torch.float32, t=64, d=2048, seed=2)
    gate_zero = ops.gelu_and_mul_sparse(x, STD_95, "tanh") == 0
    assert abs(gate_zero.float().mean().item() - 0.95) < 0.01


def test_separate_up_equals_halves() -> None:
    x = _x(torch.bfloat16, seed=3)
    gate, up = x[..., :256].contiguous(), x[..., 256:].contiguous()
    halves = ops.gelu_and_mul_sparse(x, 1.0, "tanh")
    separate = ops.gelu_and_mul_sparse(gate, 1.0, "tanh", up)
    assert contract_error(separate, halves) is None


def test_bad_arguments_name_the_op() -> None:
    with pytest.raises(ValueError, match="gelu_and_mul_sparse: approximate"):
        ops.gelu_and_mul_sparse(_x(torch.float32), 1.0, "erf")
    with pytest.raises(ValueError, match="gelu_and_mul_sparse: last dimension 3"):
        ops.gelu_and_mul_sparse(torch.ones(2, 3), 1.0)


def test_declared_in_the_catalog() -> None:
    spec = catalog.SPECS["gelu_and_mul_sparse"]
    assert spec.param_names == ("x", "std_multiplier", "approximate", "up")
    assert "gelu_and_mul_sparse" in ops.UNFUSED and ops.gelu_and_mul_sparse.spec is spec


def _module(dt: str, approximate: str | None) -> str:
    attr = "" if approximate is None else f', approximate = "{approximate}"'
    t_in, t_out = f"tensor<?x512x{dt}>", f"tensor<?x256x{dt}>"
    return (f"func.func @f(%x: {t_in}) -> ({t_out}) {{\n"
            f"  %y = vllm.gelu_and_mul_sparse %x {{std_multiplier = {STD_95!r} : f64{attr}}}"
            f" : {t_in} -> {t_out}\n  func.return %y : {t_out}\n}}")


@pytest.mark.parametrize("approximate", [None, "tanh"])
@pytest.mark.parametrize("dt", DTYPES)
def test_native_lowering_computes_the_native(dt: str, approximate: str | None) -> None:
    module = Parser(make_context(), _module(dt, approximate)).parse_module()
    module.verify()
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    x = _x(DTYPES[dt], t=9, seed=4)
    (before,) = evaluate(fn, x)
    report = lower_dispatch(module, "cpu", None)
    module.verify()
    assert [e.decision.provider for e in report] == ["native"]
    assert not [op for op in module.walk() if op.name.startswith("vllm.")]
    (after,) = evaluate(fn, x)
    want = ops.gelu_and_mul_sparse.native(x, STD_95, approximate or "none")
    assert torch.equal(before, want) and torch.equal(after, want)


def test_verifier_rejects_an_unknown_approximation() -> None:
    from xdsl.utils.exceptions import VerifyException

    module = Parser(make_context(), _module("f32", "erf")).parse_module()
    with pytest.raises(VerifyException, match="approximate must be"):
        module.verify()


def test_compiled_call_is_imported_lowered_and_exact(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    monkeypatch.delenv("VLLM_XDSL_PRIORITY", raising=False)

    def f(x: torch.Tensor) -> torch.Tensor:
        return ops.gelu_and_mul_sparse(x * 2, STD_95, "tanh")

    x = _x(torch.bfloat16, t=5, d=64, seed=5)
    compiled = torch.compile(f, backend="vllm_xdsl", options={"inner": "eager", "strict": True})
    assert torch.equal(compiled(x), f(x))
    (imported,) = tmp_path.glob("*/00-import.mlir")
    assert "vllm.gelu_and_mul_sparse" in imported.read_text()
    (lowered,) = tmp_path.glob("*/03-lower-dispatch.mlir")
    assert "vllm.gelu_and_mul_sparse" not in lowered.read_text()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dt", DTYPES)
def test_vllm_native_form_is_raised_to_the_op(dt: str, approximate: str) -> None:
    """vLLM IR's native as a model's graph holds it (its default CPU form): one op."""
    x = _x(DTYPES[dt], t=7, d=64, seed=6)
    ops_seen, out = raised_native(lambda x: _vllm_native(x, STD_95, approximate), x)
    attr = "" if approximate == "none" else ', approximate = "tanh"'
    want = f"vllm.gelu_and_mul_sparse %arg1 {{std_multiplier = {STD_95!r} : f64{attr}}}"
    assert len(ops_seen) == 1 and want in ops_seen[0], ops_seen
    assert torch.equal(out, _vllm_native(x, STD_95, approximate))


def test_other_statistics_are_not_a_sparse_gate() -> None:
    """An unbiased std is another cutoff: the GELU-and-mul is raised, the sparsity is not."""
    def unbiased(x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        gate = x[..., :d]
        cutoff = gate.mean(-1, keepdim=True) + gate.std(-1, keepdim=True) * STD_95
        return F.gelu(F.relu(gate - cutoff)) * x[..., d:]

    x = _x(torch.bfloat16, t=5, d=64, seed=7)
    ops_seen, out = raised_native(unbiased, x)
    assert [s.split(" = ")[1].split(" ")[0] for s in ops_seen] == ["vllm.gelu_and_mul"], ops_seen
    assert torch.equal(out, unbiased(x))
