"""The README's commands do what the README says they do.

The `vllm-opt` commands of "Quick start" and "Using it" are read from the README itself
(so an edited example is tested as written) and run on the bundled example layer, with
`in.mlir` standing for it.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
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


# --- The README is short, its links resolve, and what it states matches the code. ---

DOCS = sorted((ROOT / "docs").glob("*.md"))
EXAMPLE_SCRIPT = ROOT / "examples" / "vllm_tiny_llama.py"


def _subsection(heading: str) -> str:
    """The text under `### heading`, up to the next heading of level 2 or 3."""
    body = README.split(f"\n### {heading}\n", 1)[1]
    return re.split(r"\n##+ ", body, maxsplit=1)[0]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def _first_column(section_start: str, first_column: str) -> list[str]:
    """The first cells (without backticks) of the table whose header starts with
    `| first_column |`, after `section_start`."""
    text = README.split(f"\n{section_start}", 1)[1]
    rows = text.split(f"\n| {first_column} |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [row.split("|")[1].strip().strip("`") for row in rows]


def test_readme_stays_short():
    """For users: what it is, how to start, how to use it; the rest lives in docs/."""
    assert len(README.splitlines()) <= 200


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(path: Path):
    text = path.read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local or path.name != "README.md"
    missing = [link for link in local if not (path.parent / link).exists()]
    assert not missing, f"{path.relative_to(ROOT)} links to missing files: {missing}"


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_no_paths_of_one_machine(path: Path):
    """Paths are relative to the checkout (the vLLM environment is `.venv-vllm`)."""
    assert not re.findall(r"(?<![\w.])/(?:work|root|home|tmp)/\S+", path.read_text())


def test_options_table_is_the_backends_options():
    from vllm_xdsl.backend_options import OPTIONS

    table = _first_column("## Options", "option")
    assert table == list(OPTIONS)


def test_pass_table_names_the_passes():
    from vllm_xdsl.transforms import PASS_MODULES

    assert _first_column("### vllm-opt", "pass") == list(PASS_MODULES)


def test_environment_table_names_variables_the_code_reads():
    names = _first_column("## Options", "environment variable")
    assert names
    source = "\n".join(p.read_text() for p in (ROOT / "vllm_xdsl").rglob("*.py"))
    for name in names:
        assert re.search(rf"\b{name}\b", source), f"{name} is read nowhere in vllm_xdsl"


def test_priority_defaults_are_the_policys():
    from vllm_xdsl.ops.policy import PLATFORM_DEFAULTS

    text = " ".join(README.split())
    for target, providers in PLATFORM_DEFAULTS.items():
        assert f"`{target}`: {', '.join(providers)}" in text, target


def test_vllm_snippet_is_an_excerpt_of_the_example():
    """The README's vLLM code is the example's, which test/in_vllm/test_example.py runs."""
    (snippet,) = _blocks(_subsection("Inside vLLM"), "python")
    want = snippet.splitlines()
    lines = EXAMPLE_SCRIPT.read_text().splitlines()
    windows = (textwrap.dedent("\n".join(lines[i:i + len(want)])).splitlines()
               for i in range(len(lines) - len(want) + 1))
    assert want in windows, "the README's vLLM snippet is not a part of the example"
    for needed in ("skip_tokenizer_init=True", "TokensPrompt(prompt_token_ids=",
                   "gpu_memory_utilization=0.1", "post_grad_custom_post_pass",
                   '"backend": "vllm_xdsl"'):
        assert needed in snippet


def test_vllm_example_command_uses_the_environment_scripts_build():
    (command,) = _blocks(_subsection("Inside vLLM"), "sh")
    assert command.split() == [".venv-vllm/bin/python", "examples/vllm_tiny_llama.py"]
    assert "env_dir=${VLLM_XDSL_VLLM_ENV:-$repo/.venv-vllm}" in (
        ROOT / "scripts" / "vllm-env").read_text()
    assert 'os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")' in (
        EXAMPLE_SCRIPT.read_text())


def test_torch_compile_snippet_runs(tmp_path: Path):
    """The snippet compiles the tiny decoder through our passes: the report it asks for
    shows the fused ops, and it prints its difference from eager."""
    (snippet,) = _blocks(_subsection("torch.compile"), "python")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    result = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    diff = re.fullmatch(r"max abs difference from eager: (\S+)\n", result.stdout)
    assert diff is not None, result.stdout
    assert math.isfinite(float(diff.group(1)))
    chosen = set(_report(result.stderr).keys())
    ops = {key.split(": ")[1] for key in chosen}
    assert {"rms_norm_quant", "fused_add_rms_norm_quant", "silu_and_mul_quant"} <= ops, (
        result.stderr[-3000:])
