"""scripts/test, the suite's one command (CI runs it): it runs pytest, lit, mypy and pytest
on test/in_vllm in the vLLM environment whatever the others' results, passes extra arguments
to the first pytest, leaves each tool's output as it is, prints one summary line per tool
and fails if any failed; without a vLLM environment the last step is skipped with one line,
or fails when VLLM_XDSL_REQUIRE_VLLM is set. Run here with stub `python` and `lit` first on
PATH and a stub vLLM environment (they record their arguments and exit with the status
asked for; the `python` stub answers for the module after `-m`), never the real suite."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "test"

_STUB = """#!/bin/sh
printf '{name}' >> "$STUB_LOG"; printf ' [%s]' "$@" >> "$STUB_LOG"; echo >> "$STUB_LOG"
tool={tool}
[ "$tool" = vllm ] && echo "PYTHONPATH=$PYTHONPATH" >> "$STUB_LOG"
echo "$tool output: 3 passed in 0.01s"
eval "exit \\${{STUB_${{tool}}_RC:-0}}"
"""


def _stub(path: Path, name: str, tool: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_STUB.format(name=name, tool=tool))
    path.chmod(0o755)


def run_script(tmp_path: Path, rcs: dict[str, int], *args: str, vllm_env: bool = True,
               require: bool = False) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    stubs = tmp_path / "bin"
    _stub(stubs / "python", "python", '"$2"')  # python -m <tool>
    _stub(stubs / "lit", "lit", "lit")
    env_dir = tmp_path / "venv-vllm"
    if vllm_env:
        _stub(env_dir / "bin" / "python", "vllm-python", "vllm")
    log = tmp_path / "log"
    log.touch()
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
           "STUB_LOG": str(log), "VLLM_XDSL_VLLM_ENV": str(env_dir), "PYTHONPATH": "/elsewhere"}
    env.pop("VLLM_XDSL_REQUIRE_VLLM", None)
    if require:
        env["VLLM_XDSL_REQUIRE_VLLM"] = "1"
    env.update({f"STUB_{tool}_RC": str(rc) for tool, rc in rcs.items()})
    proc = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=60)
    return proc, log.read_text().splitlines()


CALLS = ["python [-m] [pytest] [-q] [--ignore=test/in_vllm] [-k] [a b] [test/test_x.py]",
         "lit [-sv] [test/filecheck]", "python [-m] [mypy]"]
WORD = {True: "passed", False: "FAILED"}


@pytest.mark.parametrize("pytest_rc, lit_rc, mypy_rc, vllm_rc, want_rc", [
    (0, 0, 0, 0, 0), (1, 0, 0, 0, 1), (0, 1, 0, 0, 1), (0, 0, 1, 0, 1), (0, 0, 0, 1, 1),
    (2, 1, 3, 4, 2), (0, 4, 3, 0, 4), (0, 0, 0, 6, 6), (5, 0, 0, 0, 5),
])
def test_runs_all_and_fails_if_any_failed(tmp_path, pytest_rc, lit_rc, mypy_rc, vllm_rc,
                                          want_rc):
    rcs = {"pytest": pytest_rc, "lit": lit_rc, "mypy": mypy_rc, "vllm": vllm_rc}
    proc, calls = run_script(tmp_path, rcs, "-k", "a b", "test/test_x.py")
    assert proc.returncode == want_rc, proc.stdout + proc.stderr
    # Every step ran after a failed one; the arguments reached the first pytest unchanged;
    # the vLLM tests ran in the vLLM environment on this tree's package.
    assert calls == [*CALLS, "vllm-python [-m] [pytest] [-q] [test/in_vllm]",
                     f"PYTHONPATH={REPO}:/elsewhere"]
    lines = proc.stdout.splitlines()
    assert lines == [
        "pytest output: 3 passed in 0.01s",  # each tool's output as it printed it
        "lit output: 3 passed in 0.01s",
        "mypy output: 3 passed in 0.01s",
        "vllm output: 3 passed in 0.01s",
        f"scripts/test: pytest exit status {pytest_rc} ({WORD[pytest_rc == 0]})",
        f"scripts/test: lit exit status {lit_rc} ({WORD[lit_rc == 0]})",
        f"scripts/test: mypy exit status {mypy_rc} ({WORD[mypy_rc == 0]})",
        f"scripts/test: vllm pytest exit status {vllm_rc} ({WORD[vllm_rc == 0]})",
    ]
    assert proc.stderr == ""


@pytest.mark.parametrize("lit_rc", [0, 3])
def test_without_a_vllm_environment_the_step_is_skipped(tmp_path, lit_rc):
    proc, calls = run_script(tmp_path, {"lit": lit_rc}, "-k", "a b", "test/test_x.py",
                             vllm_env=False)
    assert proc.returncode == lit_rc, proc.stdout + proc.stderr
    assert calls == CALLS
    lines = proc.stdout.splitlines()
    assert lines[3] == (f"scripts/test: test/in_vllm skipped: no vLLM environment at "
                        f"{tmp_path / 'venv-vllm'} (scripts/vllm-env builds it)")
    assert lines[-1] == "scripts/test: vllm pytest exit status 0 (skipped)"


def test_without_a_vllm_environment_ci_fails(tmp_path):
    proc, calls = run_script(tmp_path, {}, "-k", "a b", "test/test_x.py", vllm_env=False,
                             require=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert calls == CALLS
    lines = proc.stdout.splitlines()
    assert lines[3] == (f"scripts/test: no vLLM environment at {tmp_path / 'venv-vllm'} "
                        f"(scripts/vllm-env builds it) and VLLM_XDSL_REQUIRE_VLLM is set")
    assert lines[-1] == "scripts/test: vllm pytest exit status 1 (FAILED)"
