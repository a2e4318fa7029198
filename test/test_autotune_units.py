"""Autotuning pieces in-process: buckets, the runtime pick, policy errors, the CLI.

In-process providers are registered for one test and removed after it. No test here
depends on which of two real timings is smaller: a winner decided by the wall clock is a
coin toss on a loaded machine. Which candidate wins, and the times reported, are tested in
test_autotune.py on a virtual clock; here a real timing is only compared with a bound that
load cannot cross (a sleep never ends early), or the clock is virtual too.
"""

from __future__ import annotations

import json
import time

import pytest
import torch

from vllm_xdsl import ops
from vllm_xdsl.backends.auto.torch_ops import pick
from vllm_xdsl.ops import DispatchError, TensorMeta
from vllm_xdsl.tune import STATS, Table, bucket_of, token_bucket, tuner
from vllm_xdsl.tune import measure as measure_module
from vllm_xdsl.tune.__main__ import main
from vllm_xdsl.tune.bucket import bucket_range
from vllm_xdsl.tune.measure import measure

X = TensorMeta(torch.float32, (48, 64), "cpu")
W = TensorMeta(torch.float32, (64,), "cpu")
IR = """func.func @f(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %y = vllm.rms_norm %x weight(%w : tensor<64xf32>) {epsilon = 1.0e-06 : f64} : tensor<?x64xf32> -> tensor<?x64xf32>
  func.return %y : tensor<?x64xf32>
}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_XDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VLLM_XDSL_TUNE_TABLE", raising=False)
    monkeypatch.delenv("VLLM_XDSL_PRIORITY", raising=False)
    yield tmp_path / "cache"
    Table.forget()


@pytest.fixture
def lean_provider(monkeypatch):
    # These tests count timings and table entries, so a candidate must never be pruned as
    # hopeless: one disturbed probe on a loaded machine (CI once measured this provider at
    # 182 us against native's 12) would drop it from the later buckets. Pruning itself is
    # tested in test_slow_first_calls_do_not_prune and test_autotune.py.
    monkeypatch.setattr(tuner, "PRUNE_RATIO", float("inf"))

    @ops.rms_norm.register_impl("unit_lean")
    def rms_norm(x, weight, epsilon, variance_size=None):
        r = torch.linalg.vector_norm(x.float(), dim=-1, keepdim=True)
        y = x.float() * torch.rsqrt(r.square_().div_(x.shape[-1]).add_(epsilon))
        return (y if weight is None else y.to(weight.dtype) * weight).to(x.dtype)

    yield "unit_lean"
    ops.rms_norm.unregister_impl("unit_lean")


def test_buckets():
    assert [token_bucket(t) for t in (0, 1, 2, 3, 4, 5, 64, 65)] == [1, 1, 2, 4, 4, 8, 64, 128]
    assert bucket_range(5) == [1, 2, 4, 8] and bucket_range(1) == [1]
    a = bucket_of("rms_norm", {"x": X, "weight": W, "epsilon": 1e-5, "variance_size": None}, "cpu")
    b = bucket_of("rms_norm", {"x": TensorMeta(torch.float32, (2, 20, 64), "cpu"), "weight": W,
                               "epsilon": 1e-6, "variance_size": None}, "cpu")
    assert a == b and a.tokens == 64  # epsilon's value and the leading-dim split do not matter
    assert a.key == ("rms_norm|cpu|T<=64|x=float32[T,64] weight=float32[64] epsilon=float "
                     "variance_size=None")
    tensor_eps = TensorMeta(torch.float64, (), "cpu")
    c = bucket_of("rms_norm", {"x": X, "weight": None, "epsilon": tensor_eps,
                               "variance_size": None}, "cpu")
    assert c.shape == "x=float32[T,64] weight=None epsilon=tensor variance_size=None"


def test_slow_first_calls_do_not_prune(monkeypatch):
    """A candidate whose first call compiles (slow) but then runs fast must be timed, not
    given up on: the give-up probe comes after the warm-up (a GPU run pruned the Triton and
    CUDA kernels of static fp8 quant from every bucket on their first-call cost)."""
    # The real clock: a 20 ms sleep is over the 10 ms give-up bound however loaded the
    # machine (load only makes it longer).
    slow = measure(lambda x: time.sleep(0.02), {"x": 1}, "cpu", slice_s=0.001, give_up_us=10_000)
    assert slow.method.startswith("probe mean") and slow.runs == 2 and slow.us >= 20_000
    # A virtual clock for the fast one: on the real clock a preemption during its probe
    # (two calls of a few hundred ns) could look like a hopeless candidate.
    now = [0.0]
    monkeypatch.setattr(measure_module, "_clock", lambda: now[0])
    calls = []

    def compiles_once(x):
        calls.append(1)
        now[0] += 0.05 if len(calls) == 1 else 3e-6  # 50 ms to compile, then 3 us a call
        return x

    t = measure(compiles_once, {"x": 1}, "cpu", slice_s=0.001, give_up_us=10_000)
    assert t.method == "perf_counter min" and t.us == pytest.approx(3.0)
    assert t.runs == 200 == len(calls) - 4  # after 2 warm-up and 2 probe calls: max_runs


def test_runtime_pick():
    tokens, winners = [1, 2, 4], ["a", "b", "c"]
    assert [pick(tokens, winners, t) for t in (0, 1, 2, 3, 4, 5, 1000)] == \
        ["a", "a", "b", "c", "c", "c", "c"]


def test_policy_errors(cache_dir, lean_provider, tmp_path, monkeypatch):
    args = {"x": X, "weight": W, "epsilon": 1e-6}
    with pytest.raises(DispatchError, match=r"'auto' cannot be combined with forced unit_lean!"):
        ops.select("rms_norm", args, "rms_norm=unit_lean!,auto", target="cpu")
    with pytest.raises(DispatchError, match="unknown provider 'nope' in priority"):
        ops.select("rms_norm", args, "rms_norm=nope,auto", target="cpu")
    bad = tmp_path / "bad.json"
    bad.write_text('{"entries": {"k": {"no_winner": 1}}}')
    monkeypatch.setenv("VLLM_XDSL_TUNE_TABLE", str(bad))
    with pytest.raises(DispatchError, match=r"bad.json: not a tuning table \(entries must map"):
        ops.select("rms_norm", args, "rms_norm=auto", target="cpu")


def test_select_auto_in_process(cache_dir, lean_provider):
    # Named candidates: the suite enables Triton's interpreter, which would be one more.
    d = ops.select("rms_norm", {"x": X, "weight": W, "epsilon": 1e-6},
                   "rms_norm=unit_lean,auto", "cpu")
    assert d.provider in ("unit_lean", "native")
    loser = "native" if d.provider == "unit_lean" else "unit_lean"
    assert dict(d.rejected)[loser].startswith("slower: ")
    # Only the named providers (and native) are candidates: a new bucket measures two.
    measured = STATS.measured
    ops.select("rms_norm", {"x": TensorMeta(torch.float32, (3, 64), "cpu"), "weight": W,
                            "epsilon": 1e-6}, "rms_norm=unit_lean,auto", "cpu")
    assert STATS.measured == measured + 2


def test_cli(cache_dir, lean_provider, tmp_path, capsys):
    ir = tmp_path / "m.mlir"
    ir.write_text(IR)
    lean = ("--priority", "rms_norm=unit_lean,auto")
    assert main([str(ir), "--target", "cpu", "--max-tokens", "4", "--budget", "10", *lean]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("rms_norm")]
    assert [r.split()[1] for r in rows] == ["T<=1", "T<=2", "T<=4"]
    assert all(r.split()[2] in ("unit_lean", "native") and " (us)" in r for r in rows)
    assert "3 bucket(s), 6 timing(s) in " in out and str(cache_dir) in out
    Table.forget()  # read the file again, as another process would
    assert main([str(ir), "--target", "cpu", "--max-tokens", "4", *lean]) == 0
    assert "3 bucket(s), 0 timing(s) in " in capsys.readouterr().out
    assert main(["--show", "--target", "cpu"]) == 0
    shown = capsys.readouterr().out
    assert "autotune cache" in shown and "3 bucket(s)" in shown and "measured on: device " in shown
    assert main(["--show", "--json", "--op", "rms_norm", "--target", "cpu"]) == 0
    table = json.loads(capsys.readouterr().out)["entries"]
    assert sorted(e["tokens"] for e in table.values()) == [1, 2, 4]
    assert all(set(e["times_us"]) == {"unit_lean", "native"} for e in table.values())


@pytest.mark.parametrize("argv, message", [
    ([], "give an IR file or --model to tune, or --show"),
    (["/no/such.mlir"], "cannot read /no/such.mlir: No such file or directory"),
    (["{ir}", "--max-tokens", "0"], "--max-tokens must be at least 1"),
    (["{ir}", "--priority", "rms_norm=,auto"], "bad priority 'rms_norm=,auto' for rms_norm"),
    (["{bad}"], "not valid IR: "),
    (["{empty}"], "no vllm.* op to tune"),
])
def test_cli_bad_input(cache_dir, tmp_path, capsys, argv, message):
    files = {"ir": IR, "bad": "this is not IR", "empty": "func.func @f() {\n  func.return\n}\n"}
    for name, text in files.items():
        (tmp_path / f"{name}.mlir").write_text(text)
    argv = [a.format(**{k: str(tmp_path / f"{k}.mlir") for k in files}) for a in argv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("vllm_xdsl.tune: error: ") and message in err


def test_torch_compile_with_auto(cache_dir, tmp_path, monkeypatch):
    """torch.compile(dynamic=True) with priority auto: the graph holds the runtime selection
    (a given table: native up to 2 tokens, unit_count above) and runs each bucket's winner."""
    from vllm_xdsl.tune.bucket import Bucket

    calls = []

    @ops.rms_norm.register_impl("unit_count")
    def rms_norm(x, weight, epsilon, variance_size=None):
        calls.append(x.shape[0])
        return ops.rms_norm.native(x, weight, epsilon, variance_size)

    shape = "x=float32[T,64] weight=float32[64] epsilon=tensor variance_size=None"
    table = {Bucket("rms_norm", "cpu", t, shape).key: {"winner": "native" if t <= 2 else "unit_count"}
             for t in (1, 2, 4)}
    (tmp_path / "t.json").write_text(json.dumps({"entries": table}))
    monkeypatch.setenv("VLLM_XDSL_TUNE_TABLE", str(tmp_path / "t.json"))
    monkeypatch.setenv("VLLM_XDSL_TUNE_MAX_TOKENS", "4")

    class Norm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(64))
            self.eps = 1e-6

        def forward(self, x):
            x = x * 2
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w

    from vllm_xdsl.compile import RESULTS

    mark = len(RESULTS)
    try:
        model = Norm().eval()
        compiled = torch.compile(model, backend="vllm_xdsl", dynamic=True, options={
            "priority": "rms_norm=auto", "target": "cpu", "inner": "eager", "strict": True})
        with torch.no_grad():
            for t in (2, 3, 9):
                x = torch.randn(t, 64)
                torch.testing.assert_close(compiled(x), model(x))
        assert calls == [3, 9]  # 2 tokens: native; 3 (T<=4) and 9 (above the last): unit_count
        [result] = RESULTS[mark:]  # one graph (dynamic): its report says it was tuned
        assert result.report is not None and "rms_norm -> auto" in result.report
    finally:
        ops.rms_norm.unregister_impl("unit_count")
        torch._dynamo.reset()


def test_budget_bounds_tuning(cache_dir, lean_provider, tmp_path, capsys):
    ir = tmp_path / "m.mlir"
    ir.write_text(IR)
    # A budget spent by the first bucket: the rest take its winner, are reported as such and
    # are not cached (a later run with more budget measures them).
    assert main([str(ir), "--target", "cpu", "--max-tokens", "8", "--budget", "1e-6",
                 "--priority", "rms_norm=unit_lean,auto"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("rms_norm")]
    assert len(rows) == 4 and "(budget exhausted: previous winner)" not in rows[0]
    assert all(r.endswith("(budget exhausted: previous winner)") for r in rows[1:])
    assert "4 bucket(s), 2 timing(s) in " in out and "(budget 1e-06 s per op)" in out
    assert main(["--show", "--json", "--target", "cpu"]) == 0  # not the GPU default
    assert len(json.loads(capsys.readouterr().out)["entries"]) == 1


def test_cli_model(cache_dir, capsys):
    # The bundled decoder, captured and raised as torch.compile would: its semantic ops are
    # tuned (here only native is eligible for most: nothing else runs on this CPU).
    assert main(["--model", "demo", "--hidden", "64", "--max-tokens", "2", "--target", "cpu"]) == 0
    out = capsys.readouterr().out
    ops_tuned = {ln.split()[0] for ln in out.splitlines() if ln and not ln.startswith(" ")}
    # The bf16 residual adds are raised (rounded_sum) and fused with the norms after them.
    assert {"rms_norm_quant", "fused_add_rms_norm_quant", "fused_add_rms_norm",
            "silu_and_mul_quant"} <= ops_tuned, out
    assert "x=float32[T,64]" not in out and "x=bfloat16[T,64] " in out
