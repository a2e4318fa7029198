"""scripts/test, the suite's one command (CI runs it): it runs pytest, lit, mypy and pytest
on test/in_vllm in the vLLM environment whatever the others' results, passes extra arguments
to the first pytest, leaves each tool's output as it is, prints one summary line per tool
and fails if any failed; without a vLLM environment the last step is skipped with one line,
or fails when VLLM_XDSL_REQUIRE_VLLM is set. Run here with stub `python` and `lit` first on
PATH and a stub vLLM environment (they record their arguments and exit with the status
asked for; the `python` stub answers for the module after `-m`), never the real suite. The
vLLM tests run beside the others: their stub records into a log of its own, and their
output comes after the others' all the same."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "test"

_STUB = """#!/bin/sh
log="$STUB_LOG{log}"
printf '{name}' >> "$log"; printf ' [%s]' "$@" >> "$log"; echo >> "$log"
tool={tool}
[ "$tool" = vllm ] && echo "PYTHONPATH=$PYTHONPATH" >> "$log"
# With STUB_MARK set the vLLM stub leaves a mark and pytest's waits for it (up to 30 s):
# pytest's stub passes only if the vLLM tests started before pytest ended.
if [ -n "${{STUB_MARK:-}}" ]; then
    [ "$tool" = vllm ] && touch "$STUB_MARK"
    i=0
    while [ "$tool" = pytest ] && [ ! -e "$STUB_MARK" ] && [ $i -lt 300 ]; do
        sleep 0.1; i=$((i + 1))
    done
    [ "$tool" = pytest ] && [ ! -e "$STUB_MARK" ] && exit 9
fi
echo "$tool output: 3 passed in 0.01s"
eval "exit \\${{STUB_${{tool}}_RC:-0}}"
"""


def _stub(path: Path, name: str, tool: str, log: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_STUB.format(name=name, tool=tool, log=log))
    path.chmod(0o755)


def run_script(tmp_path: Path, rcs: dict[str, int], *args: str, vllm_env: bool = True,
               require: bool = False, mark: Path | None = None) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    stubs = tmp_path / "bin"
    _stub(stubs / "python", "python", '"$2"')  # python -m <tool>
    _stub(stubs / "lit", "lit", "lit")
    env_dir = tmp_path / "venv-vllm"
    if vllm_env:
        _stub(env_dir / "bin" / "python", "vllm-python", "vllm", log=".vllm")
    log = tmp_path / "log"
    vllm_log = tmp_path / "log.vllm"
    log.touch()
    vllm_log.touch()
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
           "STUB_LOG": str(log), "VLLM_XDSL_VLLM_ENV": str(env_dir), "PYTHONPATH": "/elsewhere"}
    env.pop("VLLM_XDSL_REQUIRE_VLLM", None)
    if require:
        env["VLLM_XDSL_REQUIRE_VLLM"] = "1"
    env.update({f"STUB_{tool}_RC": str(rc) for tool, rc in rcs.items()})
    if mark is not None:
        env["STUB_MARK"] = str(mark)
    proc = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=60)
    return proc, log.read_text().splitlines() + vllm_log.read_text().splitlines()


CALLS = ["python [-m] [pytest] [-q] [-n] [auto] [--dist] [loadfile] [--ignore=test/in_vllm] "
         "[-k] [a b] [test/test_x.py]",
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


def test_the_vllm_tests_run_beside_pytest(tmp_path):
    proc, _ = run_script(tmp_path, {}, mark=tmp_path / "vllm-started")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scripts/test: pytest exit status 0 (passed)" in proc.stdout.splitlines()


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
