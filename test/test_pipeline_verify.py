"""Verification on the compile path: once, after the passes (not after each), and still
naming the pass that broke the IR when it fails."""

from __future__ import annotations

import logging

import pytest
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from vllm_xdsl import compile as backend
from vllm_xdsl import pipeline
from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.frontend import capture, import_graph
from vllm_xdsl.models import LlamaRMSNorm
from vllm_xdsl.pipeline import PipelineOptions, StageError, run_pipeline
from vllm_xdsl.transforms.lowering.lower_dispatch import LowerDispatchPass

BAD_TARGET = "aten::no_such_op_for_this_test.default"


def _graph() -> torch.fx.GraphModule:
    norm = LlamaRMSNorm(16, 1e-5)
    return capture(norm, torch.randn(3, 16), dynamic=False)


def _break_ir(module: ModuleOp) -> None:
    """Insert a call of an op torch does not have: valid to apply, invalid to verify."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block = fn.body.block
    assert block.last_op is not None
    block.insert_op_before(CallOp(BAD_TARGET, [], [], []), block.last_op)


def _breaking(monkeypatch, culprit: str, trips: str | None = None) -> list[str]:
    """Make pass `culprit` leave invalid IR and pass `trips` raise when it sees it; the
    names of the passes applied, in order."""
    applied: list[str] = []
    real = pipeline.make_pass

    def make(name, options):
        p = real(name, options)
        if p is None:
            return p
        # The method the pipeline calls: lower-dispatch's `lower` returns its report.
        method = "lower" if isinstance(p, LowerDispatchPass) else "apply"
        apply = getattr(type(p), method)

        def patched(self, ctx, module, _name=name, _apply=apply):
            applied.append(_name)
            result = _apply(self, ctx, module)
            if _name == culprit:
                _break_ir(module)
            if _name == trips and any(
                isinstance(op, CallOp) and op.target.data == BAD_TARGET for op in module.walk()
            ):
                raise RuntimeError("tripped over the broken IR")
            return result

        monkeypatch.setattr(type(p), method, patched)
        return p

    monkeypatch.setattr(pipeline, "make_pass", make)
    return applied


def test_a_successful_transform_verifies_the_module_once(monkeypatch) -> None:
    calls = []
    real = ModuleOp.verify

    def counting(self, *args, **kwargs):
        calls.append(self)
        return real(self, *args, **kwargs)

    gm = _graph()
    monkeypatch.setattr(ModuleOp, "verify", counting)
    backend.transform(gm, PipelineOptions(target="cpu"))
    assert len(calls) == 1
    assert "verify" in backend.RESULTS.last.seconds


def test_run_pipeline_verifies_after_each_pass_by_default(monkeypatch) -> None:
    applied = _breaking(monkeypatch, "raise-native")
    with pytest.raises(StageError) as info:
        run_pipeline(import_graph(_graph()).module, PipelineOptions(target="cpu"))
    assert info.value.stage == "pass raise-native"
    assert applied == ["raise-native"]


def test_without_verify_each_a_broken_module_fails_after_the_passes(monkeypatch) -> None:
    applied = _breaking(monkeypatch, "raise-native")
    with pytest.raises(StageError) as info:
        run_pipeline(import_graph(_graph()).module,
                     PipelineOptions(target="cpu", verify_each=False))
    assert info.value.stage == "verify after the passes"
    assert BAD_TARGET in str(info.value)
    assert applied == list(pipeline.DEFAULT_PASSES)


@pytest.mark.parametrize("trips", [None, "fuse-norm-quant"])
def test_transform_names_the_pass_that_broke_the_ir(monkeypatch, trips) -> None:
    """Verified only at the end, the failure (or a later pass's crash on the broken IR) is
    replayed with verification after each pass, which names raise-native."""
    _breaking(monkeypatch, "raise-native", trips)
    with pytest.raises(StageError) as info:
        backend.transform(_graph(), PipelineOptions(target="cpu"))
    assert info.value.stage == "pass raise-native"
    assert BAD_TARGET in str(info.value)


def test_the_backend_warning_names_the_pass(monkeypatch, caplog) -> None:
    _breaking(monkeypatch, "fuse-norm-quant")
    torch._dynamo.reset()
    norm = LlamaRMSNorm(16, 1e-5)
    compiled = torch.compile(norm, backend="vllm_xdsl", options={"inner": "eager"})
    x = torch.randn(3, 16)
    with caplog.at_level(logging.WARNING, logger="vllm_xdsl"), torch.no_grad():
        torch.testing.assert_close(compiled(x), norm(x))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "pass fuse-norm-quant failed" in warnings[0] and BAD_TARGET in warnings[0]


def test_a_dump_verifies_after_each_pass(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(pipeline.DUMP_ENV, str(tmp_path))
    applied = _breaking(monkeypatch, "raise-native")
    with pytest.raises(StageError) as info:
        backend.transform(_graph(), PipelineOptions(target="cpu"))
    assert info.value.stage == "pass raise-native"
    assert applied == ["raise-native"]  # no replay: the dump run verified after each
    assert [p.name for p in tmp_path.glob("*/*FAILED.mlir")] == ["01-raise-native-FAILED.mlir"]
