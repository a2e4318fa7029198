"""`python -m vllm_xdsl.demo` runs end to end (small, eager inner, no baseline)."""

from __future__ import annotations

import re

from vllm_xdsl import demo


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
