"""The backend's contract with the user: options, fallback with one warning, strict mode,
unknown passes rejected, dumps that vllm-opt parses, runtime epsilon under dynamic=True."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys

import pytest
import torch

if not torch.cuda.is_available():  # Triton kernels run in its interpreter (set before import)
    os.environ.setdefault("TRITON_INTERPRET", "1")

from xdsl.parser import Parser  # noqa: E402
from xdsl.passes import ModulePass  # noqa: E402

from vllm_xdsl import compile as backend  # noqa: E402
from vllm_xdsl import pipeline  # noqa: E402
from vllm_xdsl.dialects import make_context  # noqa: E402
from vllm_xdsl.models import LlamaRMSNorm, Mlp  # noqa: E402
from vllm_xdsl.models.llama import DecoderConfig  # noqa: E402
from vllm_xdsl.pass_options import build_pass, python_params  # noqa: E402
from vllm_xdsl.transforms.lowering.lower_dispatch import LowerDispatchPass  # noqa: E402

HIDDEN = 64


class AddNormMlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = LlamaRMSNorm(HIDDEN, 1e-5)
        self.mlp = Mlp(DecoderConfig(hidden=HIDDEN, intermediate=64, fp8=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.norm(x))


def _compile(options: dict, dynamic: bool | None = True) -> tuple[torch.nn.Module, object]:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = AddNormMlp()
    return model, torch.compile(model, backend="vllm_xdsl", dynamic=dynamic, options=options)


def _check(model, compiled, tokens=(3, 9)) -> None:
    with torch.no_grad():
        for t in tokens:
            x = torch.randn(t, HIDDEN)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1.3e-6)


@pytest.mark.parametrize("stage", ["import", "pass", "export"])
def test_internal_failure_falls_back_with_one_warning(monkeypatch, caplog, stage) -> None:
    def boom(*args, **kwargs):
        raise RuntimeError("injected failure")

    if stage == "import":
        monkeypatch.setattr("vllm_xdsl.frontend.import_graph", boom)
    elif stage == "export":
        monkeypatch.setattr("vllm_xdsl.backends.torch_export.export_module", boom)
    else:
        real = pipeline.make_pass

        def failing(name, options):
            p = real(name, options)
            if name == "raise-native" and p is not None:
                monkeypatch.setattr(type(p), "apply", boom)
            return p

        monkeypatch.setattr(pipeline, "make_pass", failing)
    model, compiled = _compile({"inner": "eager"})
    with caplog.at_level(logging.WARNING, logger="vllm_xdsl"):
        _check(model, compiled)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    expected = {"import": "import failed", "pass": "pass raise-native failed",
                "export": "export failed"}[stage]
    assert expected in warnings[0].getMessage()
    assert "injected failure" in warnings[0].getMessage()


def test_strict_raises(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise RuntimeError("injected failure")

    monkeypatch.setattr("vllm_xdsl.frontend.import_graph", boom)
    model, compiled = _compile({"inner": "eager", "strict": True})
    with pytest.raises(Exception, match="import failed: injected failure"):
        _check(model, compiled)


def test_an_unknown_pass_fails_before_any_pass_runs(monkeypatch) -> None:
    from xdsl.dialects.builtin import ModuleOp

    from vllm_xdsl.transforms.raising.raise_native import RaiseNativePass

    ran: list[str] = []
    monkeypatch.setattr(RaiseNativePass, "apply", lambda self, ctx, module: ran.append(self.name))
    with pytest.raises(ValueError, match="unknown pass 'lower_dispatch' .*did you mean "
                                         "'lower-dispatch'"):
        pipeline.run_pipeline(ModuleOp([]), pipeline.PipelineOptions(
            passes=("raise-native", "lower_dispatch"), target="cpu"))
    assert ran == []
    pipeline.run_pipeline(ModuleOp([]), pipeline.PipelineOptions(passes=("raise-native",)))
    assert ran == ["raise-native"]  # the patch does see a run


BAD_OPTIONS = [
    ({"inner": "tvm"}, "option 'inner' must be one of 'inductor', 'eager', got 'tvm'"),
    ({"bogus": 1}, "unknown option 'bogus' (options: inner, passes, priority, target, strict, "
                   "pass_options)"),
    ({"targt": "cpu"}, "unknown option 'targt' (options: inner, passes, priority, target, "
                       "strict, pass_options); did you mean 'target'?"),
    ({"target": "tpu"}, "option 'target' must be one of 'cuda', 'rocm', 'cpu', got 'tpu'"),
    ({"passes": "raise-native"}, "option 'passes' must be a list of pass names, got "
                                 "'raise-native'"),
    ({"passes": ["nope"]}, "option 'passes': unknown pass 'nope' (known: canonicalize, cse, "
                           "dce, fuse-norm-quant, lower-dispatch, raise-native)"),
    ({"passes": ["raise_native", "fuse-norm-quant"]},
     "option 'passes': unknown pass 'raise_native' (known: canonicalize, cse, dce, "
     "fuse-norm-quant, lower-dispatch, raise-native); did you mean 'raise-native'?"),
    ({"strict": "no"}, "option 'strict' must be True or False, got 'no'"),
    ({"priority": 3}, "option 'priority' must be a string like 'rms_norm=triton,native', got 3"),
    ({"priority": "rms_nrm=triton"}, "option 'priority': bad priority 'rms_nrm=triton': "
                                     "unknown op 'rms_nrm'"),
    ({"priority": "rms_norm=tritn,native"}, "option 'priority': unknown provider 'tritn' (known: "),
    ({"pass_options": {"raise-native": {"exact": "yes"}}},
     "pass_options: pass 'raise-native': option 'exact' expects True or False, got 'yes'"),
    # Removed options (they had no effect): an unknown option like any other.
    ({"pass_options": {"raise-native": {"approx": True}}},
     "pass_options: pass 'raise-native' has no option 'approx' (options: exact)"),
    ({"pass_options": {"fuse-norm-quant": {"raise-rounded-adds": True}}},
     "pass_options: pass 'fuse-norm-quant' has no option 'raise-rounded-adds' (options: none)"),
    ({"pass_options": {"raise-nativ": {}}}, "pass_options: unknown pass 'raise-nativ' (known: "
     "canonicalize, cse, dce, fuse-norm-quant, lower-dispatch, raise-native); did you mean "
     "'raise-native'?"),
    ({"passes": ["raise-native"], "pass_options": {"lower-dispatch": {"report": True}}},
     "pass_options: pass 'lower-dispatch' is not in passes (raise-native)"),
    ({"pass_options": {"lower-dispatch": {"target": "cpu"}}},
     "pass_options: pass 'lower-dispatch': set 'target' with the backend option 'target'"),
    ({"pass_options": ["raise-native"]}, "option 'pass_options' must be a dict of pass name"),
]


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_bad_options_are_one_line_errors(options, message) -> None:
    with pytest.raises(backend.OptionsError) as info:
        backend.BackendOptions.parse(options)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_bad_option_raises_through_torch_compile_without_fallback(monkeypatch, caplog) -> None:
    """The user's typo is raised as it is (not BackendCompilerFailed, not a fallback),
    before the graph is imported."""
    def boom(*args, **kwargs):
        raise AssertionError("the graph was imported")

    monkeypatch.setattr("vllm_xdsl.frontend.import_graph", boom)
    model, compiled = _compile({"inner": "eager", "target": "tpu"})
    with caplog.at_level(logging.WARNING, logger="vllm_xdsl"), \
            pytest.raises(backend.OptionsError) as info:
        compiled(torch.randn(3, HIDDEN))
    assert str(info.value) == "option 'target' must be one of 'cuda', 'rocm', 'cpu', got 'tpu'"
    assert not caplog.records


def test_bad_option_is_the_last_line_a_user_sees() -> None:
    script = ("import torch\n"
              "from vllm_xdsl.models import LlamaRMSNorm\n"
              "m = torch.compile(LlamaRMSNorm(8, 1e-5), backend='vllm_xdsl',\n"
              "                  options={'pass_options': {'raise-native': {'aprox': True}}})\n"
              "m(torch.randn(2, 8))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 1
    lines = run.stderr.rstrip("\n").splitlines()
    assert lines[-1] == ("vllm_xdsl.backend_options.OptionsError: pass_options: pass "
                         "'raise-native' has no option 'aprox' (options: exact)")
    assert "BackendCompilerFailed" not in run.stderr and "Set TORCHDYNAMO_VERBOSE" not in run.stderr
    assert len(lines) < 20, run.stderr  # torch's frames to the user's call; none of ours


class SqrtDivNorm(torch.nn.Module):
    """RMSNorm as `x / sqrt(var + eps)`: an f32 ulp from the contract's `x * rsqrt`, so
    raised by default and not with exact=True."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


@pytest.mark.parametrize("exact, raised", [(False, 1), (True, 0)])
def test_pass_options_reach_the_pass(exact, raised) -> None:
    torch._dynamo.reset()
    model = SqrtDivNorm()
    compiled = torch.compile(model, backend="vllm_xdsl", dynamic=True, options={
        "inner": "eager", "strict": True, "passes": ["raise-native"],
        "pass_options": {"raise-native": {"exact": exact}}})
    x = torch.randn(4, HIDDEN)
    with torch.no_grad():
        got = compiled(x)
        want = model(x)
    counts = backend.RESULTS.last.stages[-1].op_counts
    assert counts.get("vllm.rms_norm", 0) == raised, counts
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1.3e-6)


@dataclasses.dataclass(frozen=True)
class _TwoWordPass(ModulePass):
    name = "two-word"
    two_words: bool = False

    def apply(self, ctx, op) -> None:
        pass


@pytest.mark.parametrize("key", ["two_words", "two-words"])
def test_pass_options_kebab_and_snake_case(key) -> None:
    # No pass here has a two-word option: a test pass stands in for one.
    built = build_pass(_TwoWordPass, python_params(_TwoWordPass, {key: True}), python=True)
    assert built == _TwoWordPass(two_words=True)


def test_pass_options_reach_make_pass() -> None:
    opts = backend.BackendOptions.parse({"pass_options": {"lower-dispatch": {"report": False}}})
    lower = pipeline.make_pass("lower-dispatch", dataclasses.replace(opts.pipeline, target="rocm"))
    assert isinstance(lower, LowerDispatchPass) and (lower.target, lower.report) == ("rocm", False)


def test_dump_dir_stages_parse_with_vllm_opt(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    model, compiled = _compile({"inner": "eager", "target": "cpu"})
    _check(model, compiled, tokens=(5,))
    (graph_dir,) = tmp_path.iterdir()
    names = sorted(p.name for p in graph_dir.iterdir())
    assert names == ["00-import.mlir", "01-raise-native.mlir", "02-fuse-norm-quant.mlir",
                     "03-lower-dispatch.mlir", "dispatch-report.txt"]
    assert "-> native" in (graph_dir / "dispatch-report.txt").read_text()
    assert "vllm.rms_norm" in (graph_dir / "01-raise-native.mlir").read_text()
    for name in names[:-2]:  # in-process parse: what the vllm-opt run below does, faster
        Parser(make_context(), (graph_dir / name).read_text()).parse_module().verify()
    run = subprocess.run([sys.executable, "-m", "vllm_xdsl.tools.vllm_opt",
                          str(graph_dir / names[-2])], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_dump_dir_that_is_a_file_warns_once_and_compiles(tmp_path, monkeypatch, caplog) -> None:
    not_a_dir = tmp_path / "dump"
    not_a_dir.write_text("a file")
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(not_a_dir))
    model, compiled = _compile({"inner": "eager", "target": "cpu", "strict": True})
    with caplog.at_level(logging.WARNING, logger="vllm_xdsl"):
        _check(model, compiled)
        _compile({"inner": "eager", "target": "cpu", "strict": True})[1](torch.randn(2, HIDDEN))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [f"vllm_xdsl: VLLM_XDSL_DUMP_DIR={not_a_dir} is not a writable "
                        "directory (Not a directory); IR dumps are off"]
    assert backend.RESULTS.last.stages[-1].name == "lower-dispatch"  # the passes ran
    assert not_a_dir.read_text() == "a file"


def test_dump_write_failure_turns_dumping_off(tmp_path, caplog) -> None:
    dumper = pipeline.Dumper(tmp_path / "root", "g")
    dumper.dir.rmdir()
    dumper.dir.write_text("in the way")  # every write below fails
    with caplog.at_level(logging.WARNING, logger="vllm_xdsl"):
        dumper.text("dispatch-report.txt", "report")
        dumper.text("dispatch-report.txt", "report")
    assert dumper.failed
    assert [r.getMessage() for r in caplog.records] == [
        f"vllm_xdsl: VLLM_XDSL_DUMP_DIR={tmp_path / 'root'} is not a writable directory "
        "(Not a directory); IR dumps are off"]


def test_runtime_epsilon_unlowered_and_provider() -> None:
    """dynamic=True passes epsilon as a 0-d f64 tensor: exported unlowered (native traced
    with the tensor) and as a provider op (wrapper reading it at run time)."""
    model, compiled = _compile({"inner": "eager", "passes": ["raise-native"], "strict": True})
    _check(model, compiled)
    stage = backend.RESULTS.last.stages[-1]
    assert stage.op_counts["vllm.rms_norm"] == 1
    pytest.importorskip("triton")
    # Triton runs on the GPU where there is one, else in its interpreter on the CPU.
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, compiled = _compile({
        "inner": "eager", "passes": ["raise-native", "lower-dispatch"], "strict": True,
        "target": device, "priority": "rms_norm=triton!",
    })
    model.to(device)
    with torch.no_grad():
        x = torch.randn(5, HIDDEN, device=device)
        torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    assert backend.RESULTS.last.stages[-1].op_counts["triton.rms_norm"] == 1


def test_training_forward_and_backward() -> None:
    """With grad enabled AOTAutograd splits forward/backward: passes run on the forward,
    gradients still match eager."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = AddNormMlp()
    twin = AddNormMlp()
    twin.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="vllm_xdsl", dynamic=True,
                             options={"inner": "eager", "strict": True})
    x = torch.randn(6, HIDDEN)
    compiled(x).square().sum().backward()
    twin(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=name)
