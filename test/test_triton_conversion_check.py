"""The check that lets the Triton kernels round with the GPU's conversion instructions
(launch: VLLM_XDSL_TRITON_HW_CASTS, default "auto"; conversion_check)."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

from vllm_xdsl.backends.triton import conversion_check as C  # noqa: E402
from vllm_xdsl.backends.triton import launch as L  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CPU = torch.device("cpu")
WARNING = "keep the f32 rounding emulation"
# The probe's extremes overflow the interpreter's numpy (x * x of 2**126 in the variance).
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


def test_fp8_probe_has_every_value_and_every_tie():
    vals = C.fp8_probe().flatten()
    grid = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    grid = grid[torch.isfinite(grid)]
    mids = (grid.unique()[1:] + grid.unique()[:-1]) / 2
    assert torch.isin(grid, vals).all() and torch.isin(mids, vals).all()
    assert (vals.abs() > 448).sum() >= 8  # saturation, both signs
    assert torch.equal(vals[vals == 0].view(torch.int32).unique(),
                       torch.tensor([-(2**31), 0], dtype=torch.int32))  # -0.0 and +0.0


def test_bf16_probe_sums_are_exact_ties_and_neighbours():
    x, r = C.bf16_probe()
    exact = x.double() + r.double()
    s = x.float() + r.float()
    assert torch.equal(s.double(), exact)  # the f32 sum the kernel rounds is exact
    low = s.view(torch.int32) & 0xFFFF
    ties = int((low == 0x8000).sum())
    # 14 of each exponent's 16 (mantissa, sign) pairs at offset 1 are ties (the other two
    # cross down a binade); the other offsets put the sum just beside a tie or below it.
    assert ties == 14 * x.shape[0], ties
    assert torch.isfinite(s).all() and (s.abs() >= 2.0**-126).all()  # normals only


def test_emulated_kernels_pass_the_check():
    assert C.mismatch(DEVICE, hw=False) is None


@pytest.mark.skipif(DEVICE.type != "cpu", reason="needs Triton's interpreter")
def test_the_check_catches_wrong_conversions(monkeypatch):
    # Forced onto the interpreter, whose f32 -> fp8 cast is wrong (OPS.md), the hardware
    # form of the kernels must fail the check.
    monkeypatch.setattr(L, "converts_exactly", lambda device: True)
    problem = C.mismatch(CPU, hw=True)
    assert problem is not None and "e4m3fn conversions differ from torch's" in problem


@pytest.mark.skipif(not L.converts_exactly(DEVICE), reason="needs an NVIDIA sm_89+ GPU")
def test_gpu_conversions_pass_the_check():
    assert C.mismatch(DEVICE, hw=True) is None


@pytest.fixture
def capable(monkeypatch):
    """The CPU as if it had the instructions, with no check run yet and the default mode."""
    monkeypatch.setattr(L, "converts_exactly", lambda device: True)
    monkeypatch.setattr(C, "_checked", {})
    monkeypatch.delenv(L.HW_CASTS_ENV, raising=False)
    return monkeypatch


def test_auto_uses_the_instructions_once_the_check_passes(capable):
    calls = []
    capable.setattr(C, "mismatch", lambda device, hw: calls.append((device, hw)))
    assert L.uses_hw_casts(CPU) and L.uses_hw_casts(CPU)
    assert calls == [(CPU, True)]  # checked once per device


@pytest.mark.skipif(DEVICE.type != "cpu", reason="needs Triton's interpreter")
def test_auto_keeps_the_emulation_where_the_check_fails(capable):
    with pytest.warns(RuntimeWarning, match=WARNING + ".*e4m3fn conversions differ"):
        assert not L.uses_hw_casts(CPU)  # the real check, in the interpreter
    capable.setattr(C, "mismatch", lambda device, hw: pytest.fail("checked twice"))
    assert not L.uses_hw_casts(CPU)


def test_a_check_that_cannot_run_keeps_the_emulation(capable):
    def broken(device, hw):
        raise RuntimeError("no kernel image\nsecond line")

    capable.setattr(C, "mismatch", broken)
    with pytest.warns(RuntimeWarning, match=WARNING + r".*RuntimeError: no kernel image\)$"):
        assert not L.uses_hw_casts(CPU)


def test_modes(capable):
    capable.setattr(C, "mismatch", lambda device, hw: "differs")
    capable.setenv(L.HW_CASTS_ENV, "1")  # on, unchecked
    assert L.uses_hw_casts(CPU)
    capable.setenv(L.HW_CASTS_ENV, "0")
    assert not L.uses_hw_casts(CPU)
    with L.hw_casts(True):  # benchmarks and tests ask for either form, unchecked
        assert L.uses_hw_casts(CPU)
    with L.hw_casts(False):
        assert not L.uses_hw_casts(CPU)


def test_bad_mode_warns_once_and_means_auto(capable):
    capable.setattr(C, "mismatch", lambda device, hw: "differs")
    L._hw_casts_mode.cache_clear()  # no memory of earlier tests
    capable.setenv(L.HW_CASTS_ENV, "bogus")
    with pytest.warns(RuntimeWarning) as record:
        assert not L.uses_hw_casts(CPU)  # auto: the check ran and failed
        assert not L.uses_hw_casts(CPU)
    messages = [str(w.message) for w in record if L.HW_CASTS_ENV in str(w.message)]
    assert messages == ["VLLM_XDSL_TRITON_HW_CASTS='bogus' is not auto, 1 or 0 (or true, false); "
                        "using auto"]


def test_never_where_the_device_lacks_the_instructions(monkeypatch):
    monkeypatch.setenv(L.HW_CASTS_ENV, "1")
    assert not L.uses_hw_casts(CPU)  # the interpreter: its casts are wrong
    with L.hw_casts(True):
        assert not L.uses_hw_casts(CPU)


def test_loading_the_provider_installs_the_check():
    # launch cannot import conversion_check (it launches launch's kernels): the check is
    # installed when the Triton functions load, as they do when the provider registers.
    import subprocess
    import sys

    script = (
        "from vllm_xdsl.ops import registry; registry.ensure_loaded()\n"
        "from vllm_xdsl.backends.triton import launch as L\n"
        "check = L._conversions_checked\n"  # before this script imports conversion_check
        "from vllm_xdsl.backends.triton import conversion_check as C\n"
        "assert check is C.conversions_checked, check\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
