"""The cpu provider on a CPU that lacks what its kernels need, the flags faked: this suite's
hosts have them, so lower-dispatch-cpu-unavailable.mlir, which needs such a CPU, does not
run there."""

from __future__ import annotations

import pytest

from vllm_xdsl.backends.cpu import host
from vllm_xdsl.backends.cuda.register import available

LACKS = "cpu: this CPU lacks avx2, fma, f16c (the kernels need AVX2, FMA and F16C)"


@pytest.fixture
def bare_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "cpu_flags", lambda: frozenset({"sse2"}))


def test_host_problem_names_what_is_missing(bare_cpu: None) -> None:
    assert host.host_problem() == LACKS
    assert available("cpu", "cpu") == LACKS

