"""The OPS.md tolerance helper: each rule accepts what it should and rejects the rest."""

from __future__ import annotations

import pytest
import torch

from vllm_xdsl.ops.tolerance import assert_close_contract, contract_error, fp8_step, tolerance

E4M3, E4M3UZ = torch.float8_e4m3fn, torch.float8_e4m3fnuz


def test_tolerance_table():
    assert tolerance(torch.float32) == (1e-5, 1.3e-6)
    assert tolerance(torch.float16) == (1e-3, 1e-3)
    assert tolerance(torch.float16, "norm") == (1e-2, 2e-3)
    assert tolerance(torch.bfloat16, "norm") == (1e-3, 1.6e-2)
    assert tolerance(torch.bfloat16) == (1e-3, 1.6e-2)
    assert tolerance(torch.int8) == (1.0, 0.0)
    assert tolerance(torch.float32, "scales") == (1e-6, 1e-5)
    with pytest.raises(ValueError, match="no tolerance"):
        tolerance(torch.float64)


@pytest.mark.parametrize("dtype,value,step", [
    (E4M3, 1.0, 0.125), (E4M3, 448.0, 32.0), (E4M3, 300.0, 32.0), (E4M3, 0.01, 2.0**-9),
    (E4M3, 0.0, 2.0**-9), (E4M3UZ, 224.0, 16.0), (E4M3UZ, 0.0, 2.0**-10),
])
def test_fp8_step(dtype, value, step):
    assert fp8_step(torch.tensor([value]), dtype).item() == step


def test_fp8_rule():
    e = torch.linspace(-400, 400, 1000).to(E4M3)
    assert contract_error(e.clone(), e) is None
    one_step = e.float().clone()
    one_step[500] = e.float()[500] + fp8_step(e.float()[500:501], E4M3).item()
    assert contract_error(one_step.to(E4M3), e) is None  # 1 of 1000 one step off: fine
    # The OPS.md pitfall: -124.3 stored as -64 instead of -128 is far more than one step.
    far = e.float().clone()
    far[0] = -64.0 if e.float()[0] != -64.0 else -128.0
    msg = contract_error(far.to(E4M3), e)
    assert msg is not None and "more than one step" in msg
    # More than 1 % one step off: rejected by the >= 99 % exact rule.
    many = e.float().clone()
    idx = torch.arange(0, 1000, 50)  # 20 elements = 2 %
    many[idx] = many[idx] + fp8_step(many[idx], E4M3)
    msg = contract_error(many.to(E4M3), e)
    assert msg is not None and ">= 99 % must be exact" in msg


def test_values_int8_and_scales():
    e = torch.randn(64, dtype=torch.float32)
    assert contract_error(e + 5e-6, e) is None
    assert "outside atol" in contract_error(e + 1e-4, e)
    q = torch.randint(-100, 100, (64,), dtype=torch.int8)
    assert contract_error(q + 1, q) is None
    assert contract_error(q + 2, q) is not None
    s = torch.rand(8, 1) + 0.5
    assert contract_error(s * (1 + 5e-6), s, kind="scales") is None
    assert contract_error(s * (1 + 1e-3), s, kind="scales") is not None
    h = torch.randn(64).half()
    assert contract_error(h + 5e-3, h) is not None
    assert contract_error(h + 5e-3, h, kind="norm") is None


def test_structure_mismatches():
    e = torch.ones(4, 8)
    assert "dtype" in contract_error(e.half(), e)
    assert "shape" in contract_error(torch.ones(8, 4), e)
    n = e.clone()
    n[0, 0] = float("nan")
    assert contract_error(n, e) == "NaN positions differ"
    assert contract_error(n, n.clone()) is None
    with pytest.raises(AssertionError, match="shape"):
        assert_close_contract(torch.ones(8, 4), e)
