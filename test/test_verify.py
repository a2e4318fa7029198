"""`python -m vllm_xdsl.verify`: rows, statuses and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from vllm_xdsl import ops
from vllm_xdsl.ops.grid import cases
from vllm_xdsl.ops.tolerance import contract_error
from vllm_xdsl.verify import main


def rows(out: str, provider: str) -> dict[str, list[str]]:
    """dtype -> [status, detail...] for the rows of one provider."""
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == provider:
            found[parts[2]] = parts[3:]
    return found


def test_native_rows_pass(capsys):
    assert main(["--op", "silu_and_mul", "--provider", "native"]) == 0
    r = rows(capsys.readouterr().out, "native")
    assert set(r) == {"float16", "bfloat16", "float32"}
    assert all(v[0] == "PASS" for v in r.values())


def test_fail_unavailable_skip(scratch, capsys):
    scratch(ops.rms_norm, "t_wrong", lambda x, weight, epsilon, variance_size=None: x * 1.01)
    scratch(ops.rms_norm, "t_off", lambda x, weight, epsilon, variance_size=None: x,
            supported="needs sm90")
    scratch(ops.rms_norm, "t_f16", ops.rms_norm.native,
            supports_args=lambda x, **_: x.dtype == torch.float16 or "f16 only")
    assert main(["--op", "rms_norm", "--provider", "t_wrong"]) == 1
    out = capsys.readouterr().out
    r = rows(out, "t_wrong")
    assert all(v[0] == "FAIL" and v[1:3] == ["max", "error"] for v in r.values()), out
    assert "1 failed" not in out and "3 rows, 3 failed" in out
    assert main(["--op", "rms_norm", "--provider", "t_off"]) == 1  # nothing was compared
    out = capsys.readouterr().out
    r = rows(out, "t_off")
    assert all(v == ["UNAVAILABLE", "needs", "sm90"] for v in r.values())
    assert "nothing was checked" in out and "  t_off: needs sm90" in out
    assert main(["--op", "rms_norm", "--provider", "t_f16"]) == 0
    r = rows(capsys.readouterr().out, "t_f16")
    assert r["float16"][0] == "PASS"
    assert r["float32"][0] == "SKIP" and r["float32"][-2:] == ["f16", "only"]


def test_nothing_compared_fails_and_says_what_is_needed(scratch, capsys):
    """Only SKIP rows: the summary says nothing was checked and why, and the exit is 1."""
    scratch(ops.silu_and_mul, "t_never", ops.silu_and_mul.native,
            supports_args=lambda x, **_: "needs TRITON_INTERPRET=1")
    assert main(["--op", "silu_and_mul", "--provider", "t_never"]) == 1
    out = capsys.readouterr().out
    assert all(v[0] == "SKIP" for v in rows(out, "t_never").values())
    # The summary line itself says why the exit is 1 (not "3 rows, 0 failed").
    assert ("3 rows, none compared: nothing was checked (every row is UNAVAILABLE or SKIP)"
            "\n  t_never: needs TRITON_INTERPRET=1\n") in out
    assert "0 failed" not in out


def test_triton_on_cpu_without_the_interpreter_compares_nothing():
    """The issue's run: every row SKIP (or UNAVAILABLE without Triton), on any machine."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-m", "vllm_xdsl.verify", "--provider", "triton",
                        "--device", "cpu", "--op", "silu_and_mul"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert ("\n3 rows, none compared: nothing was checked (every row is UNAVAILABLE or SKIP)"
            "\n  triton: ") in p.stdout


def test_the_summary_line_agrees_with_the_exit_status():
    from vllm_xdsl.verify import Row, summary

    passed, failed = Row("op", "p", "f16", passed=2), Row("op", "p", "f32", failure="x")
    skipped = Row("op", "q", "f16", skipped=["needs a GPU"])
    unavailable = Row("op", "r", "f16", unavailable="no CUDA")
    assert summary([passed, skipped]) == ("2 rows, 0 failed", True)
    assert summary([passed, failed]) == ("2 rows, 1 failed", False)
    assert summary([passed], load_errors=1) == ("1 rows, 0 failed, 1 load errors", False)
    text, ok = summary([skipped, unavailable])
    assert not ok
    assert text.splitlines()[:3] == [
        "2 rows, none compared: nothing was checked (every row is UNAVAILABLE or SKIP)",
        "  q: needs a GPU", "  r: no CUDA"]


def test_raising_impl_fails(scratch, capsys):
    def broken(x, up=None):
        raise RuntimeError("kernel exploded")

    scratch(ops.silu_and_mul, "t_boom", broken)
    assert main(["--op", "silu_and_mul", "--provider", "t_boom"]) == 1
    assert "raised RuntimeError: kernel exploded" in capsys.readouterr().out


def test_load_errors_fail(monkeypatch, capsys):
    monkeypatch.setattr(ops.registry, "_load_errors", ["provider 'x' failed to load"])
    assert main(["--op", "silu_and_mul", "--provider", "native"]) == 1
    assert "LOAD ERROR  provider 'x' failed to load" in capsys.readouterr().out


@pytest.mark.parametrize("argv,msg", [
    (["--op", "nope"], "unknown op 'nope'"),
    (["--provider", "nope"], "unknown provider 'nope'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_args(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_cuda_device_without_cuda(monkeypatch, capsys):
    # A CPU-only torch (or no visible GPU): one line naming the problem, not a traceback
    # from the first tensor made on the device.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as e:
        main(["--device", "cuda", "--op", "silu_and_mul", "--provider", "native"])
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("vllm_xdsl.verify: error: --device cuda: torch ")
    assert "has no CUDA device (torch.cuda.is_available() is False)" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without a CUDA device")
def test_cuda_device_without_cuda_subprocess():
    p = subprocess.run([sys.executable, "-m", "vllm_xdsl.verify", "--device", "cuda"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.count("\n") == 1 and "--device cuda" in p.stderr
    assert f"torch {torch.__version__} has no CUDA device" in p.stderr


def test_cli_subprocess():
    p = subprocess.run([sys.executable, "-m", "vllm_xdsl.verify", "--op", "rms_nrom"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "unknown op 'rms_nrom'" in p.stderr


def test_grid_sizes():
    # The reduced grid covers every dtype; the full grid is OPS.md's.
    reduced = list(cases("rms_norm"))
    full = list(cases("rms_norm", full=True))
    assert {c.dtype for c in reduced} == {torch.float16, torch.bfloat16, torch.float32}
    # weights: x's dtype, none, and f32 (Gemma) on f16/bf16: 3 + 3 + 2 per shape and eps
    assert len(full) == 4 * 4 * 3 * (3 + 3 + 2) and len(reduced) == 2 * 1 * 1 * (3 + 3 + 2)
    assert {c.args[1].dtype for c in reduced if c.args[1] is not None} == {
        torch.float16, torch.bfloat16, torch.float32}
    for op in ("fused_add_rms_norm", "fused_add_rms_norm_quant"):  # both sums, every dtype
        variants = {(c.dtype, c.kwargs.get("rounded_sum", False)) for c in cases(op)}
        assert len(variants) == 6, (op, variants)
    assert {c.args[0].shape[-1] for c in full} == {16, 64, 4096, 5120}
    q = list(cases("rms_norm_quant"))
    assert {(c.args[5], c.args[6], c.args[7]) for c in q} == {
        (torch.float8_e4m3fn, True, "tensor"), (torch.float8_e4m3fnuz, True, "tensor"),
        (torch.int8, True, "tensor"), (torch.float8_e4m3fn, False, "token"),
        (torch.float8_e4m3fnuz, False, "token"), (torch.float8_e4m3fn, False, "group"),
        (torch.float8_e4m3fnuz, False, "group"), (torch.int8, False, "token")}


# --- the fp8 exact rate: per case over its shapes, the one-step bound per shape -----------

TOKEN_QUANT = "dynamic_per_token_scaled_fp8_quant"


def _bumped(q: torch.Tensor, count: int, steps: int) -> torch.Tensor:
    """q with `count` of its values `steps` fp8 codes further from zero (none saturating:
    each code step is one step of the grid, so steps=2 is more than one step off)."""
    bits = q.view(torch.uint8).flatten().clone()
    movable = torch.nonzero((bits & 0x7F) < 0x7C).flatten()[:count]
    assert len(movable) == count, "too few values to move"
    bits[movable] += steps
    return bits.view(q.dtype).reshape(q.shape)


def _wrong_quant(count: int, steps: int, tokens: int | None = None):
    """The native per-token fp8 quant with `count` values moved `steps` codes, in every
    case (tokens=None) or only in the cases of that many tokens."""
    native = ops.ALL_OPS[TOKEN_QUANT].native

    def impl(x, scale_ub=None, fp8_dtype=torch.float8_e4m3fn, zero_point=None, variant=""):
        q, s = native(x, scale_ub, fp8_dtype, zero_point, variant)
        if tokens is None or x.shape[0] == tokens:
            q = _bumped(q, count, steps)
        return q, s

    return impl


def test_one_flip_in_the_smallest_shape_is_within_the_rate(scratch, capsys):
    """1 of 64 values one step off in each T=1 case (1.6 % of that tensor): the rate holds
    over the case's shapes (T=1 and T=17: 1 of 1152), as the real GELU flips need."""
    scratch(ops.ALL_OPS[TOKEN_QUANT], "t_flip1", _wrong_quant(1, 1, tokens=1))
    assert main(["--op", TOKEN_QUANT, "--provider", "t_flip1"]) == 0
    out = capsys.readouterr().out
    assert all(v[0] == "PASS" for v in rows(out, "t_flip1").values()), out
    assert "over all shapes of a case together" in out
    # Per tensor, that T=1 output breaks the rate: the check is real, the pooling decides.
    case = next(c for c in cases(TOKEN_QUANT) if c.args[0].shape[0] == 1)
    want, _ = ops.ALL_OPS[TOKEN_QUANT].native(*case.args)
    assert "differ by one step" in contract_error(_bumped(want, 1, 1), want)


def test_many_one_step_flips_fail(scratch, capsys):
    """2 % of the values one step off in every case: beyond the rate over all shapes."""
    scratch(ops.ALL_OPS[TOKEN_QUANT], "t_flips", _wrong_quant(23, 1))
    assert main(["--op", TOKEN_QUANT, "--provider", "t_flips"]) == 1
    out = capsys.readouterr().out
    r = rows(out, "t_flips")
    assert r and all(v[0] == "FAIL" for v in r.values()), out
    assert "q: over its 2 shapes together, 46 of 1152 fp8 values differ by one step" in out


def test_flips_crowded_into_one_shape_fail(scratch, capsys):
    """13 of 64 values off in the T=1 cases only: 13 of 1152 over the shapes, still > 1 %."""
    scratch(ops.ALL_OPS[TOKEN_QUANT], "t_crowd", _wrong_quant(13, 1, tokens=1))
    assert main(["--op", TOKEN_QUANT, "--provider", "t_crowd"]) == 1
    out = capsys.readouterr().out
    assert all(v[0] == "FAIL" for v in rows(out, "t_crowd").values()), out
    assert "13 of 1152 fp8 values differ by one step (at most 11 may" in out


def test_a_two_step_error_in_one_value_fails(scratch, capsys):
    """One value of one shape two steps off: the per-shape bound fails it, rate or not."""
    scratch(ops.ALL_OPS[TOKEN_QUANT], "t_far", _wrong_quant(1, 2, tokens=17))
    assert main(["--op", TOKEN_QUANT, "--provider", "t_far"]) == 1
    out = capsys.readouterr().out
    assert all(v[0] == "FAIL" for v in rows(out, "t_far").values()), out
    assert "T=17 H=64" in out and "1 fp8 values more than one step off" in out


def test_shapeless_labels_pool_only_shapes():
    """Cases pooled together differ in their shape only: not in dtype, scheme or variant."""
    by_pool: dict[str, set] = {}
    for c in cases("gelu_and_mul_quant"):
        key = (c.dtype, tuple(a if not isinstance(a, torch.Tensor) else None
                              for a in c.args[1:]))
        by_pool.setdefault(c.shapeless_label, set()).add(key)
        assert "T=" not in c.shapeless_label and "d=" not in c.shapeless_label
    assert all(len(keys) == 1 for keys in by_pool.values()), by_pool
    assert any("up" in label for label in by_pool) and len(by_pool) > 10
