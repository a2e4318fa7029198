"""vllm-opt run in the test's own process (fast, and a monkeypatch reaches it)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

from vllm_xdsl.tools.vllm_opt import main


def run_opt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run vllm-opt in this process; `stdin` text is read as the tool reads stdin."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse exits on its own errors
                code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stdin = old_stdin
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())
