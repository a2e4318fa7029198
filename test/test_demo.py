"""`python -m vllm_xdsl.demo` runs end to end (small, eager inner, no baseline); its
compile-time comparison runs each variant in a fresh process with empty caches."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from vllm_xdsl import demo

SMALL = ["--layers", "1", "--hidden", "64", "--intermediate", "128", "--tokens", "3", "9",
         "--inner", "eager", "--target", "cpu", "--dtype", "f32"]
CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "VLLM_XDSL_CACHE_DIR")


def test_demo_prints_stages_dispatch_error_and_times(capsys) -> None:
    assert demo.main(["--layers", "1", "--hidden", "64", "--intermediate", "128",
                      "--tokens", "3", "9", "--inner", "eager", "--no-baseline",
                      "--repeat", "1", "--target", "cpu", "--dtype", "f32"]) == 0
    out = capsys.readouterr().out
    assert "compiled 1 graph(s)" in out
    for stage in ("import", "raise-native", "fuse-norm-quant", "lower-dispatch"):
        assert re.search(rf"^{stage}\s+\d+\s+\d+", out, re.M), stage
    assert re.search(r"vllm\.rms_norm_quant x\d", out)  # fusion happened
    assert "-> native" in out  # dispatch decisions on the CPU
    errors = [float(e) for e in re.findall(r"T=\d+\s+([0-9.e+-]+)\s+\(\|eager\|", out)]
    assert len(errors) == 2
    assert max(errors) <= 1e-5  # f32: the raised and fused ops compute what eager computes
    assert re.search(r"T=9\s+[0-9.]+\s+[0-9.]+", out)  # a timing row


def test_compile_is_timed_in_a_fresh_process_with_empty_caches(monkeypatch) -> None:
    # Only the vllm_xdsl side, inner eager: a cold plain-Inductor compile takes ~30 s here.
    spawned = []
    real_run = subprocess.run

    def run(cmd, **kw):
        env = kw["env"]
        spawned.append((cmd, {v: (env[v], os.path.exists(env[v])) for v in CACHE_VARS}))
        return real_run(cmd, **kw)

    monkeypatch.setattr(demo.subprocess, "run", run)
    seconds = demo.fresh_compile(SMALL, "vllm_xdsl")
    assert seconds > 0
    ((cmd, caches),) = spawned
    assert cmd[cmd.index("-m") + 1:] == ["vllm_xdsl.demo", *SMALL, "--time-one", "vllm_xdsl"]
    for var, (path, existed) in caches.items():
        assert not existed and path != os.environ.get(var), var  # empty, not the caller's
        assert not os.path.exists(path)  # removed afterwards
    assert len({path for path, _ in caches.values()}) == 3


def test_a_failing_compile_process_is_reported(capsys) -> None:
    with pytest.raises(RuntimeError, match=r"inductor compile process exited 2: .*invalid int"):
        demo.fresh_compile(["--layers", "one"], "inductor")


def test_compile_times_report_both_and_their_ratio(monkeypatch, capsys) -> None:
    measured = []

    def fresh_compile(argv, variant):
        measured.append((argv, variant))
        return {"vllm_xdsl": 3.0, "inductor": 12.0}[variant]

    monkeypatch.setattr(demo, "fresh_compile", fresh_compile)
    demo.print_compile_times(SMALL, demo.parse_args(SMALL))
    out = capsys.readouterr().out
    assert measured == [(SMALL, "vllm_xdsl"), (SMALL, "inductor")]  # one process each
    assert "each variant in a fresh process with empty caches" in out
    assert re.search(r"vllm_xdsl \(inner=eager\)\s+3\.0 s", out)
    assert re.search(r"plain Inductor\s+12\.0 s", out)
    assert re.search(r"ratio vllm_xdsl / Inductor\s+0\.25x", out)
