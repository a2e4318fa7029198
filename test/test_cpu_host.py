"""The cpu provider on a CPU that lacks what its kernels need, the flags faked: this suite's
hosts have them, so lower-dispatch-cpu-unavailable.mlir, which needs such a CPU, does not
run there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.vllm_opt_runner import run_opt

from vllm_xdsl.backends.cpu import host
from vllm_xdsl.backends.cuda import build
from vllm_xdsl.backends.cuda.register import available
from vllm_xdsl.ops import registry

NORM = (Path(__file__).parent / "filecheck" / "lower-dispatch-cpu-unavailable.mlir").read_text()
LACKS = "cpu: this CPU lacks avx2, fma, f16c (the kernels need AVX2, FMA and F16C)"


@pytest.fixture
def bare_cpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The impls keep what they found they can run on: forget it, with the flags faked and
    # again after (the real flags), so that no other test sees the fake.
    monkeypatch.setattr(host, "cpu_flags", lambda: frozenset({"sse2"}))
    registry.changed()
    yield
    monkeypatch.undo()
    registry.changed()


def test_host_problem_names_what_is_missing(bare_cpu: None) -> None:
    assert host.host_problem() == LACKS
    assert available("cpu", "cpu") == LACKS


def test_preferred_gives_way_forced_is_one_line(bare_cpu: None) -> None:
    preferred = run_opt("--lower-dispatch=target=cpu priority=cpu", stdin=NORM)
    assert preferred.returncode == 0, preferred.stderr
    assert "cpu.rms_norm" not in preferred.stdout and "aten::rsqrt.default" in preferred.stdout
    forced = run_opt("--lower-dispatch=target=cpu priority=rms_norm=cpu!", stdin=NORM)
    assert forced.returncode != 0 and "Traceback" not in forced.stderr
    assert forced.stderr.strip().endswith(f"cannot run: {LACKS}"), forced.stderr


def test_prebuild_on_such_a_cpu_is_one_line(bare_cpu: None, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    """`python -m vllm_xdsl.backends.cuda.build cpu` says what the CPU lacks, before any
    compiler runs (-march=native would fail in vx_vec.h)."""
    assert build.main(["cpu"]) == 1
    assert capsys.readouterr().err == f"error: {LACKS}\n"
