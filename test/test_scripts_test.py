"""scripts/test, the suite's one command (CI runs it): it runs pytest, lit and mypy whatever
the others' results, passes extra arguments to pytest, leaves each tool's output as it is,
prints one summary line per tool and fails if any failed. Run here with stub `python` and
`lit` first on PATH (they record their arguments and exit with the status asked for; the
`python` stub answers for the module after `-m`), never the real suite."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "scripts" / "test"

_STUB = """#!/bin/sh
printf '{name}' >> "$STUB_LOG"; printf ' [%s]' "$@" >> "$STUB_LOG"; echo >> "$STUB_LOG"
tool={tool}
echo "$tool output: 3 passed in 0.01s"
eval "exit \\${{STUB_${{tool}}_RC:-0}}"
"""


def run_script(tmp_path: Path, pytest_rc: int, lit_rc: int, mypy_rc: int, *args: str):
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    for name, tool in (("python", '"$2"'), ("lit", "lit")):  # python -m <tool>
        stub = stubs / name
        stub.write_text(_STUB.format(name=name, tool=tool))
        stub.chmod(0o755)
    log = tmp_path / "log"
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
           "STUB_LOG": str(log), "STUB_pytest_RC": str(pytest_rc), "STUB_lit_RC": str(lit_rc),
           "STUB_mypy_RC": str(mypy_rc)}
    proc = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=60)
    return proc, log.read_text().splitlines()


@pytest.mark.parametrize("pytest_rc, lit_rc, mypy_rc, want_rc", [
    (0, 0, 0, 0), (1, 0, 0, 1), (0, 1, 0, 1), (0, 0, 1, 1), (2, 1, 3, 2), (0, 4, 3, 4),
    (5, 0, 0, 5),
])
def test_runs_all_and_fails_if_any_failed(tmp_path, pytest_rc, lit_rc, mypy_rc, want_rc):
    proc, calls = run_script(tmp_path, pytest_rc, lit_rc, mypy_rc, "-k", "a b",
                             "test/test_x.py")
    assert proc.returncode == want_rc, proc.stdout + proc.stderr
    # lit and mypy ran after a failed pytest; the arguments reached pytest unchanged.
    assert calls == ["python [-m] [pytest] [-q] [-k] [a b] [test/test_x.py]",
                     "lit [-sv] [test/filecheck]", "python [-m] [mypy]"]
    lines = proc.stdout.splitlines()
    word = {True: "passed", False: "FAILED"}
    assert lines == [
        "pytest output: 3 passed in 0.01s",  # each tool's output as it printed it
        "lit output: 3 passed in 0.01s",
        "mypy output: 3 passed in 0.01s",
        f"scripts/test: pytest exit status {pytest_rc} ({word[pytest_rc == 0]})",
        f"scripts/test: lit exit status {lit_rc} ({word[lit_rc == 0]})",
        f"scripts/test: mypy exit status {mypy_rc} ({word[mypy_rc == 0]})",
    ]
    assert proc.stderr == ""

