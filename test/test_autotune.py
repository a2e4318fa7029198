"""Autotuned dispatch (`auto` priority) with real out-of-tree providers, measured on the CPU.

The providers of test/fixtures/tune_providers (tune_fast, tune_slow, and tune_wrong: the
cheapest but wrong) are pip-installed into a temporary --target directory and used from
subprocesses (entry points; registrations cannot leak into other tests). Each subprocess
gets its own cache directory.

The timings are on a virtual clock, not the wall clock: each subprocess calls the fixture's
`use_virtual_clock()`, after which every measurement the tuner makes (warm-up, give-up
probe, the timed runs) goes through the product's own code but reads a clock that only the
calls themselves advance, each provider and native by a fixed cost of its token count
(COSTS_US in the fixture). The winners and the exact times below are therefore fixed by
those costs. Real timings on a loaded 2-core machine are not: the same test with
`time.perf_counter` timed native at 568 us and tune_fast at 684 us (2-3x faster on an idle
machine) and failed 2 of 5 runs of this file alone. Sleeps could only make a provider slower
than native, never faster, and the winner has to beat native by real work, whose time
under load has no bound. The correctness checks, the exclusion of the wrong provider,
pruning, the cache and its reuse in a new process all run for real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "tune_providers"

EAGER = r"""
import json, sys, warnings
import torch
from vllm_xdsl import ops, tune
from vllm_xdsl.ops.tolerance import contract_error
import vllm_xdsl_tune_demo as demo
demo.use_virtual_clock()
x, w = torch.randn(48, 4096), torch.randn(4096)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ops.set_priority("rms_norm=auto")
    d = ops.rms_norm.explain(x, w, 1e-6)
    out = ops.rms_norm(x, w, 1e-6)
    d33 = ops.rms_norm.explain(x[:33], w, 1e-6)  # same bucket (T<=64): no new measuring
print(json.dumps({
    "winner": d.provider, "rejected": d.rejected, "winner33": d33.provider,
    "error": contract_error(out, ops.rms_norm.native(x, w, 1e-6), kind="norm"),
    "measured": tune.STATS.measured, "cached": tune.STATS.cached,
    "calls": demo.CALLS, "warnings": [str(c.message) for c in caught
                                     if "autotune cache" in str(c.message)],
}))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("tune_site")
    src = tmp / "src"
    shutil.copytree(FIXTURE, src)  # build outside the repo tree
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(tmp / "site"), str(src)],
        check=True, capture_output=True, timeout=300,
    )
    return tmp / "site"


def run(site: Path, cache: Path, script: str, *args: str) -> dict:
    env = {**os.environ, "VLLM_XDSL_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    env.pop("VLLM_XDSL_PRIORITY", None)
    # The test providers compete with native only: Triton's CPU interpreter (which the
    # suite enables for the Triton tests) would be one more, very slow, candidate, and the
    # host build of the kernels (provider cpu) one whose calls the virtual clock cannot
    # price (it would be timed at 0 us): without a compiler neither is available.
    env.pop("TRITON_INTERPRET", None)
    env["VLLM_XDSL_CXX"] = str(Path(sys.executable).parent / "no-such-compiler")
    proc = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cache_entries(cache: Path) -> dict:
    data = json.loads((cache / "autotune.json").read_text())
    return data["environments"]["cpu"]["entries"]


def test_eager_auto_picks_fastest_correct_and_cache_is_reused(site, tmp_path):
    cache = tmp_path / "cache"
    first = run(site, cache, EAGER)
    assert first["winner"] == "tune_fast", first["rejected"]
    assert first["winner33"] == "tune_fast" and first["error"] is None
    rejected = dict(first["rejected"])
    assert rejected["tune_wrong"].startswith("wrong result: T=64: out: ")  # cheapest, excluded
    assert rejected["native"] == "slower: 650.0 us vs 188.0 us at T<=64"
    assert rejected["tune_slow"] == "slower: 6500.0 us vs 188.0 us at T<=64"  # its probe
    # Three candidates timed (wrong is excluded before timing); the second call of the same
    # bucket reused the table.
    assert first["measured"] == 3 and first["cached"] >= 1
    assert first["calls"]["tune_fast"] >= 6  # correctness x2, warm-up, timing, and the call
    assert first["calls"]["tune_wrong"] == 1  # its failed correctness check: never timed
    [entry] = cache_entries(cache).values()
    assert entry["winner"] == "tune_fast" and set(entry["excluded"]) == {"tune_wrong"}
    # The per-call costs of the fixture at 64 tokens: the minimum of the timed runs (and,
    # for tune_slow, the mean of the give-up probe) is exactly one call's cost.
    assert entry["times_us"] == {"tune_fast": 188.0, "native": 650.0, "tune_slow": 6500.0}
    assert set(entry["hashes"]) == {"tune_fast", "tune_slow", "tune_wrong", "native"}

    # A new process: nothing measured, the cached winner used.
    second = run(site, cache, EAGER)
    assert second["winner"] == "tune_fast" and second["measured"] == 0
    assert second["calls"]["tune_wrong"] == 0 and second["calls"]["tune_slow"] == 0
    assert second["warnings"] == []


    # A stale file (measured with another torch), then a corrupt one (a truncated write):
    # each ignored with one warning, measured again and rewritten for this environment.
    path = cache / "autotune.json"
    for damage in ("stale", "corrupt"):
        if damage == "stale":
            data = json.loads(path.read_text())
            data["environments"]["cpu"]["env"]["torch"] = "0.0.1"
            path.write_text(json.dumps(data))
        else:
            path.write_text('{"format": 1, "environments": {"cpu": ')
        r = run(site, cache, EAGER)
        assert len(r["warnings"]) == 1 and f"is {damage}" in r["warnings"][0], r["warnings"]
        assert "ignored, it will be rewritten" in r["warnings"][0]
        assert r["winner"] == "tune_fast" and r["measured"] == 3
        [entry] = cache_entries(cache).values()  # rewritten: valid, for this environment
        assert entry["winner"] == "tune_fast"
        assert json.loads((cache / "autotune.json").read_text())["environments"]["cpu"][
            "env"]["torch"] != "0.0.1"


LOWER = r"""
import json, sys
import torch
from xdsl.parser import Parser
from vllm_xdsl import ops, tune
from vllm_xdsl.backends.torch_export.exporter import export_module
from vllm_xdsl.dialects import make_context
from vllm_xdsl.ops.tolerance import contract_error
from vllm_xdsl.transforms.lowering.lower_dispatch import lower_dispatch
from vllm_xdsl.backends.auto.torch_ops import pick
import vllm_xdsl_tune_demo as demo
demo.use_virtual_clock()
IR = '''func.func @f(%x: tensor<?x4096xf32>, %w: tensor<4096xf32>) -> tensor<?x4096xf32> {
  %y = vllm.rms_norm %x weight(%w : tensor<4096xf32>) {epsilon = 1.0e-06 : f64} : tensor<?x4096xf32> -> tensor<?x4096xf32>
  func.return %y : tensor<?x4096xf32>
}'''
module = Parser(make_context(), IR).parse_module()
report = lower_dispatch(module, "cpu", "rms_norm=auto")
ops_after = [op.name for op in module.walk() if op.name.startswith(("auto.", "vllm.", "torch."))]
[sel] = [op for op in module.walk() if op.name == "auto.rms_norm"]
tokens, winners = sel.table()
gm = export_module(module)
ops.set_priority("rms_norm=auto")
w = torch.randn(4096)
runs = []
for t in (1, 3, 40, 200):
    x = torch.randn(t, 4096)
    before = dict(demo.CALLS)
    out = gm(x, w)[0]
    ran = [p for p in demo.CALLS if demo.CALLS[p] != before[p]] or ["native"]
    runs.append({"t": t, "ran": ran, "pick": pick(tokens, winners, t),
                 "eager": ops.rms_norm.explain(x, w, 1e-6).provider,
                 "error": contract_error(out, ops.rms_norm.native(x, w, 1e-6), kind="norm")})
print(json.dumps({"ops": ops_after, "tokens": tokens, "winners": winners, "runs": runs,
                  "report": report.format(), "measured": tune.STATS.measured,
                  "code": gm.code}))
"""


def test_lowering_emits_runtime_selection_that_matches_eager(site, tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_XDSL_TUNE_MAX_TOKENS", "64")
    r = run(site, tmp_path / "cache", LOWER)
    report = r["report"]  # every measured time: the message of each failure below
    assert r["ops"] == ["auto.rms_norm"], report  # one selection op, nothing else
    assert r["tokens"] == [1, 2, 4, 8, 16, 32, 64], report
    # The fixture's costs: tune_fast pays a fixed 60 us, so native wins up to 4 tokens.
    assert r["winners"] == ["native"] * 3 + ["tune_fast"] * 4, report
    # Exported: one runtime-selection torch op holding the table.
    assert r["code"].count("torch.ops.vllm_xdsl_auto.rms_norm.default(") == 1
    assert ("1e-06, None, [1, 2, 4, 8, 16, 32, 64], ['native', 'native', 'native', "
            "'tune_fast', 'tune_fast', 'tune_fast', 'tune_fast'])") in r["code"]
    assert "rms_norm -> auto" in report and "runtime selection over 7 token bucket(s)" in report
    assert "rejected tune_wrong: wrong result: T=1: out: " in report
    assert "rejected tune_slow: slower in every bucket" in report
    assert "note: auto T<=1: native [native 20.0 us, tune_fast 62.0 us, tune_slow 200.0 us]; " \
        "tune_wrong excluded (wrong): T=1: out: " in report
    # Over 8x slower than the best at 1 token: given up on, not measured in larger buckets.
    assert "note: auto T<=64: tune_fast [tune_fast 188.0 us, native 650.0 us]; tune_slow not " \
        "measured: over 8x slower than native at T<=1 (200.0 vs 20.0 us); tune_wrong not " \
        "measured: wrong result at T<=1" in report
    assert r["measured"] == 3 + 2 * 6  # three candidates at T<=1, two in each larger bucket
    for run_ in r["runs"]:  # compiled and eager agree, and the compiled graph ran the winner
        assert run_["ran"] == [run_["pick"]] == [run_["eager"]], (run_, report)
        assert run_["error"] is None
    # 1 and 3 tokens: native; 40 tokens, and 200 (above the last bucket): tune_fast.
    assert [run_["pick"] for run_ in r["runs"]] == ["native", "native", "tune_fast", "tune_fast"]
