"""fatrelu_and_mul (vLLM's FatreluAndMul, MiniCPM-S), the act-and-mul family's member with a
parameter of its own, added through the catalog, its native and its Triton kernel alone: the
native against vLLM's formula and an explicit reference, the kernel bit for bit, and the
dialect op, torch op and lowerings derived from the declaration."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers.evaluate import evaluate
from helpers.raised import raised_native, raised_run
from xdsl.dialects import func
from xdsl.parser import Parser

from vllm_xdsl import ops
from vllm_xdsl.backends.triton import functions as T
from vllm_xdsl.core import catalog
from vllm_xdsl.dialects import make_context, vllm
from vllm_xdsl.transforms.lowering.lower_dispatch import lower_dispatch

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
THRESHOLDS = (0.0, 0.1, -0.25)


def _x(dtype: torch.dtype, t: int = 9, d: int = 96, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(t, 2 * d, generator=g) * 0.5).to(dtype)
    x[0, 0], x[0, 1], x[1, 2] = float("nan"), float("-inf"), 0.1  # NaN kept, a value at 0.1
    return x


class FatreluAndMul(torch.nn.Module):
    """vllm/model_executor/layers/activation.py (vLLM 0.32): its forward_native, as written."""

    def __init__(self, threshold: float = 0.0) -> None:
        super().__init__()
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        x1 = x[..., :d]
        x2 = x[..., d:]
        x1 = F.threshold(x1, self.threshold, 0.0)
        return x1 * x2


def _vllm_native(x: torch.Tensor, threshold: float) -> torch.Tensor:
    return FatreluAndMul(threshold)(x)


def _reference(x: torch.Tensor, threshold: float) -> torch.Tensor:
    """In f64: the gate compared with the threshold rounded to f32 (not to x's dtype), the
    product rounded once."""
    d = x.shape[-1] // 2
    gate, up = x[..., :d].double(), x[..., d:].double()
    th = torch.tensor(threshold, dtype=torch.float32).item()
    kept = torch.where(gate <= th, torch.zeros_like(gate), gate)
    return (kept * up).to(x.dtype)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("dt", DTYPES)
def test_native_is_vllm_native_and_the_reference(dt: str, threshold: float) -> None:
    x = _x(DTYPES[dt])
    got = ops.fatrelu_and_mul.native(x, threshold)
    assert _same(got, _vllm_native(x, threshold))
    assert _same(got, _reference(x, threshold))


def test_the_threshold_is_not_rounded_to_the_dtype() -> None:
    # bf16(0.1) = 0.10009765625 > 0.1: torch keeps it; a threshold rounded to bf16 would not.
    x = torch.tensor([[0.1, 2.0]], dtype=torch.bfloat16)
    assert ops.fatrelu_and_mul.native(x, 0.1).item() == pytest.approx(0.2001953125)
    assert T.fatrelu_and_mul(x, 0.1).item() == pytest.approx(0.2001953125)


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("dt", DTYPES)
def test_triton_kernel_is_bit_exact(dt: str, threshold: float) -> None:
    x = _x(DTYPES[dt], t=5, d=200, seed=1)  # not a power of two: a masked tile
    native = ops.fatrelu_and_mul.native
    assert _same(T.fatrelu_and_mul(x, threshold), native(x, threshold))
    wide = _x(DTYPES[dt], t=5, d=200, seed=2)
    gate, up = x[..., :200].contiguous(), wide[..., 200:]  # up: rows strided
    assert _same(T.fatrelu_and_mul(gate, threshold, up), native(gate, threshold, up))


def test_declared_once_and_derived() -> None:
    spec = catalog.SPECS["fatrelu_and_mul"]
    assert [p.name for p in spec.own_scalars] == ["threshold"]
    assert ops.fatrelu_and_mul.spec is spec and "fatrelu_and_mul" in ops.UNFUSED
    schema = str(torch.ops.vllm_xdsl.fatrelu_and_mul.default._schema)
    assert schema == ("vllm_xdsl::fatrelu_and_mul(Tensor x, float threshold=0., "
                      "Tensor? up=None) -> Tensor")
    assert vllm.FatreluAndMulOp.name == "vllm.fatrelu_and_mul"
    assert catalog.fused_of("fatrelu_and_mul") is None  # no fused quant form yet
    # Implemented by native and triton; the CUDA/ROCm family has no kernel for it (yet).
    assert "cuda" in ops.silu_and_mul.impls()
    assert list(ops.fatrelu_and_mul.impls()) == ["triton", "native"]


def test_bad_arguments_name_the_op() -> None:
    with pytest.raises(ValueError, match="^fatrelu_and_mul: last dimension 3 is not even$"):
        ops.fatrelu_and_mul(torch.ones(2, 3), 0.1)


def _module(dt: str, threshold: float | None) -> str:
    attr = "" if threshold is None else f" {{threshold = {threshold!r} : f64}}"
    t_in, t_out = f"tensor<?x192x{dt}>", f"tensor<?x96x{dt}>"
    return (f"func.func @f(%x: {t_in}) -> ({t_out}) {{\n"
            f"  %y = vllm.fatrelu_and_mul %x{attr} : {t_in} -> {t_out}\n"
            f"  func.return %y : {t_out}\n}}")


@pytest.mark.parametrize("threshold", [None, 0.1])
@pytest.mark.parametrize("dt", DTYPES)
def test_native_lowering_computes_the_native(dt: str, threshold: float | None) -> None:
    module = Parser(make_context(), _module(dt, threshold)).parse_module()
    module.verify()
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    x = _x(DTYPES[dt], seed=3)
    want = ops.fatrelu_and_mul.native(x, 0.0 if threshold is None else threshold)
    (before,) = evaluate(fn, x)
    report = lower_dispatch(module, "cpu", None)
    module.verify()
    assert [e.decision.provider for e in report] == ["native"]
    assert not [op for op in module.walk() if op.name.startswith("vllm.")]
    (after,) = evaluate(fn, x)
    assert _same(before, want) and _same(after, want)


def test_lowers_to_the_triton_kernel() -> None:
    module = Parser(make_context(), _module("bf16", 0.1)).parse_module()
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    report = lower_dispatch(module, "cpu", "fatrelu_and_mul=triton")
    assert [e.decision.provider for e in report] == ["triton"]
    (op,) = [op for op in module.walk() if op.name == "triton.fatrelu_and_mul"]
    assert op.properties["threshold"].value.data == 0.1
    x = _x(torch.bfloat16, seed=4)
    (out,) = evaluate(fn, x)
    assert _same(out, ops.fatrelu_and_mul.native(x, 0.1))


def test_compiled_call_is_imported_lowered_and_exact(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    monkeypatch.delenv("VLLM_XDSL_PRIORITY", raising=False)

    def f(x: torch.Tensor) -> torch.Tensor:
        return ops.fatrelu_and_mul(x * 2, 0.1)

    x = _x(torch.bfloat16, t=5, d=64, seed=5)
    compiled = torch.compile(f, backend="vllm_xdsl", options={"inner": "eager", "strict": True})
    assert _same(compiled(x), f(x))
    (imported,) = tmp_path.glob("*/00-import.mlir")
    assert "vllm.fatrelu_and_mul" in imported.read_text()
    (lowered,) = tmp_path.glob("*/03-lower-dispatch.mlir")
    assert "vllm.fatrelu_and_mul" not in lowered.read_text()


# --- raised from vLLM's forms -------------------------------------------------------------


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("dt", DTYPES)
def test_vllm_native_form_is_raised_to_the_op(dt: str, threshold: float) -> None:
    """FatreluAndMul.forward_native as a graph holds it (vLLM's CPU form): one exact op."""
    x = _x(DTYPES[dt], t=7, d=64, seed=6)
    # A module attribute, as in vLLM: Dynamo records it as a constant. (A float that changed
    # since the last compile of the same code becomes a graph input, automatic dynamic, and a
    # threshold known only at run time stays unraised: hence the reset.)
    torch._dynamo.reset()
    ops_seen, out = raised_native(FatreluAndMul(threshold), x)
    assert len(ops_seen) == 1, ops_seen
    assert f"vllm.fatrelu_and_mul %arg1 {{threshold = {_f64(threshold)} : f64}}" in ops_seen[0]
    assert _same(out, _vllm_native(x, threshold))


def test_separate_projections_are_raised_with_up() -> None:
    def mlp(x: torch.Tensor) -> torch.Tensor:  # HF style: act(gate_proj(x)) * up_proj(x)
        return F.threshold(x * 2, 0.25, 0.0) * (x + 1)

    x = _x(torch.bfloat16, t=5, d=32, seed=7)[:, :32].contiguous()
    ops_seen, out = raised_native(mlp, x)
    assert len(ops_seen) == 1 and "vllm.fatrelu_and_mul" in ops_seen[0] and " up(" in ops_seen[0]
    assert _same(out, mlp(x))


def test_another_replacement_value_is_not_fatrelu() -> None:
    def other(x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return F.threshold(x[..., :d], 0.1, -1.0) * x[..., d:]

    x = _x(torch.float32, t=5, d=32, seed=8)
    ops_seen, out = raised_native(other, x)
    assert ops_seen == []
    assert _same(out, other(x))


@pytest.mark.parametrize("functionalized", ["v2", "v1"])
def test_vllm_c_kernel_call_is_raised(functionalized: str) -> None:
    """`_C.fatrelu_and_mul(out, x, threshold)` into a torch.empty buffer (vLLM's CUDA form,
    a stand-in here): one op with the threshold. vLLM's kernel zeroes a NaN gate
    (`f > threshold ? f : 0`), the native keeps it: on NaN-free values they agree."""
    import vllm_standins

    vllm_standins.register()

    def block(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(*x.shape[:-1], x.shape[-1] // 2, dtype=x.dtype)
        torch.ops._C.fatrelu_and_mul(out, x, 0.1)
        return out

    x = _x(torch.bfloat16, t=6, d=64, seed=9).nan_to_num(0.0, 0.0, 0.0)
    with torch._inductor.config.patch(enable_auto_functionalized_v2=functionalized == "v2"):
        module, expected, got = raised_run(block, (x,))
    raised = [op for op in module.walk() if op.name.startswith("vllm.")]
    assert [op.name for op in raised] == ["vllm.fatrelu_and_mul"]
    assert raised[0].properties["threshold"].value.data == 0.1
    assert _same(got[0], expected[0]) and _same(got[0], ops.fatrelu_and_mul.native(x, 0.1))
    nan = torch.tensor([[float("nan"), 2.0]], dtype=torch.bfloat16)
    kernel = torch.empty(1, 1, dtype=torch.bfloat16)
    torch.ops._C.fatrelu_and_mul(kernel, nan, 0.1)
    assert kernel.item() == 0 and ops.fatrelu_and_mul.native(nan, 0.1).isnan().all()


def _f64(v: float) -> str:
    """How xDSL prints an f64 property."""
    return f"{v:.6e}"
