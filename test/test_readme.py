"""The README's commands do what the README says they do.

The `vllm-opt` commands of "Quick start" and "Using it" are read from the README itself
(so an edited example is tested as written) and run on the bundled example layer, with
`in.mlir` standing for it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_xdsl.examples import example_path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
EXAMPLE = example_path("llama_decoder_layer")
# Runs vllm-opt's main with Triton made unimportable (a machine without the triton extra).
_NO_TRITON = (
    "import sys; sys.modules['triton'] = None; "
    "from vllm_xdsl.tools.vllm_opt import main; sys.exit(main(sys.argv[1:]))"
)


def _sh_block(section: str) -> list[str]:
    """The lines of the first ```sh block under the `## section` heading."""
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", body, re.S)
    assert block is not None, f"README section {section!r} has no sh block"
    return block.group(1).splitlines()


def _vllm_opt_commands(section: str) -> list[list[str]]:
    """Each `vllm-opt ...` command of a section's sh block (also after `&&`), as argv."""
    commands = []
    for line in _sh_block(section):
        words = shlex.split(line, comments=True)
        while "&&" in words:
            i = words.index("&&")
            commands.append(words[:i])
            words = words[i + 1:]
        commands.append(words)
    return [c[1:] for c in commands if c and c[0] == "vllm-opt"]


def _run(args: list[str], *, triton: bool = True, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    argv = [str(EXAMPLE) if a in ("in.mlir", "vllm_xdsl/examples/llama_decoder_layer.mlir")
            else a for a in args]
    python = [sys.executable, "-m", "vllm_xdsl.tools.vllm_opt"] if triton else [
        sys.executable, "-c", _NO_TRITON]
    return subprocess.run([*python, *argv], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600)


def _ops(ir: str) -> set[str]:
    return set(re.findall(r"= ([a-z]+\.[a-z0-9_]+)", ir))


def _report(stderr: str) -> dict[str, str]:
    """Dispatch report: `%value: op` -> provider."""
    return dict(re.findall(r"^@\w+ (%\S+: \w+) -> (\w+)$", stderr, re.M))


def _env_without_nvcc(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "VLLM_XDSL_NVCC")}
    env["PATH"] = str(tmp_path)  # nothing on it; the interpreter is called by its path
    return env


def _needs_triton() -> None:
    pytest.importorskip("triton", reason="this README command needs the triton extra")


USING_IT = _vllm_opt_commands("Using it")
QUICK_START = _vllm_opt_commands("Quick start")


def test_readme_sections_have_their_commands():
    assert len(USING_IT) == 3
    assert len(QUICK_START) == 1
    assert any("examples/llama_decoder_layer.mlir" in a for a in QUICK_START[0])


@pytest.mark.parametrize("args", USING_IT, ids=lambda a: " ".join(a))
def test_using_it_command(args: list[str]):
    """Each command lowers every semantic op, and does what its options say."""
    options = " ".join(args)
    if "triton" in options:
        _needs_triton()
    result = _run(args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    if "-t" in args:
        # "print the Triton kernels": kernels, not the "no triton ops" note.
        target = args[args.index("-t") + 1]
        assert target == "triton"
        assert "no triton ops" not in result.stdout
        assert result.stdout.count("@triton.jit") >= 2
        return
    ops = _ops(result.stdout)
    assert not {o for o in ops if o.startswith("vllm.")}, ops
    if "target=rocm" in options:
        # the rocm target's providers (rocm, triton, native: torch ops), never cuda
        assert {o.split(".")[0] for o in ops} <= {"rocm", "triton", "torch"}, ops
    if "priority=rms_norm=triton,native" in options:
        assert "triton.rms_norm" in ops
        assert not {o for o in ops if o.endswith(".rms_norm") and o != "triton.rms_norm"}
    if "report=true" in options:
        header = re.match(r"dispatch report: (\d+) node\(s\)\n", result.stderr)
        assert header is not None, result.stderr
        report = _report(result.stderr)
        assert len(report) == int(header.group(1)) > 0
        if "priority=rms_norm=triton,native" in options:
            norms = {k: v for k, v in report.items() if k.endswith(": rms_norm")}
            assert norms and set(norms.values()) == {"triton"}, report


def test_quick_start_command(tmp_path: Path):
    """As the README says: without nvcc and Triton every kernel is rejected with its reason
    and the ops fall back to native; the lowered IR goes to stdout, the report to stderr."""
    (args,) = QUICK_START
    result = _run(args, triton=False, env=_env_without_nvcc(tmp_path))
    assert result.returncode == 0, result.stderr
    report = _report(result.stderr)
    assert report and set(report.values()) == {"native"}, result.stderr
    assert result.stderr.count("rejected cuda: nvcc not found") == len(report)
    assert result.stderr.count("rejected triton: triton is not importable") == len(report)
    ops = _ops(result.stdout)
    assert ops and all(o.startswith("torch.") for o in ops), ops
    # fuse-norm-quant ran: the report names fused ops
    assert any(key.endswith(": rms_norm_quant") for key in report)


def test_quick_start_command_with_triton_and_no_nvcc(tmp_path: Path):
    _needs_triton()
    (args,) = QUICK_START
    result = _run(args, env=_env_without_nvcc(tmp_path))
    assert result.returncode == 0, result.stderr
    assert set(_report(result.stderr).values()) == {"triton"}, result.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="the README's nvcc case needs nvcc")
def test_quick_start_command_with_nvcc():
    (args,) = QUICK_START
    result = _run(args)
    assert result.returncode == 0, result.stderr
    assert set(_report(result.stderr).values()) == {"cuda"}, result.stderr


def test_the_ci_command_ends_with_the_test_command():
    """Quick start step 2 runs .ci/run, which (the README says) ends with scripts/test."""
    assert "bash .ci/run" in _sh_block("Quick start")
    lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip()]
    assert lines[-1] == "scripts/test"
    test_script = ROOT / "scripts" / "test"
    assert os.access(test_script, os.X_OK)
    assert "python -m pytest" in test_script.read_text()
    assert "lit -sv test/filecheck" in test_script.read_text()
