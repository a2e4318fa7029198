"""scripts/test, the suite's one command (CI runs it): it runs pytest and lit whatever the
other's result, passes extra arguments to pytest, leaves pytest's output as it is, prints
one summary line per tool and fails if either failed. Run here with stub `python` and `lit`
first on PATH (they record their arguments and exit with the status asked for), never
the real suite."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "scripts" / "test"

_STUB = """#!/bin/sh
printf '{name}' >> "$STUB_LOG"; printf ' [%s]' "$@" >> "$STUB_LOG"; echo >> "$STUB_LOG"
echo "{name} output: 3 passed in 0.01s"
exit "${{STUB_{var}_RC:-0}}"
"""


def run_script(tmp_path: Path, pytest_rc: int, lit_rc: int, *args: str):
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    for name, var in (("python", "PYTEST"), ("lit", "LIT")):
        stub = stubs / name
        stub.write_text(_STUB.format(name=name, var=var))
        stub.chmod(0o755)
    log = tmp_path / "log"
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
           "STUB_LOG": str(log), "STUB_PYTEST_RC": str(pytest_rc), "STUB_LIT_RC": str(lit_rc)}
    proc = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=60)
    return proc, log.read_text().splitlines()


@pytest.mark.parametrize("pytest_rc, lit_rc, want_rc", [
    (0, 0, 0), (1, 0, 1), (0, 1, 1), (2, 1, 2), (5, 0, 5),
])
def test_runs_both_and_fails_if_either_failed(tmp_path, pytest_rc, lit_rc, want_rc):
    proc, calls = run_script(tmp_path, pytest_rc, lit_rc, "-k", "a b", "test/test_x.py")
    assert proc.returncode == want_rc, proc.stdout + proc.stderr
    # lit ran after a failed pytest; the arguments reached pytest unchanged.
    assert calls == ["python [-m] [pytest] [-q] [-k] [a b] [test/test_x.py]",
                     "lit [-sv] [test/filecheck]"]
    lines = proc.stdout.splitlines()
    word = {True: "passed", False: "FAILED"}
    assert lines == [
        "python output: 3 passed in 0.01s",  # each tool's output as it printed it
        "lit output: 3 passed in 0.01s",
        f"scripts/test: pytest exit status {pytest_rc} ({word[pytest_rc == 0]})",
        f"scripts/test: lit exit status {lit_rc} ({word[lit_rc == 0]})",
    ]
    assert proc.stderr == ""

