"""With inner="inductor", a graph compiled once is loaded from AOTAutograd's cache in a
later compile (a second process, as plain Inductor does: issue 17), and only where our
pipeline would produce the very same graph: the cache key carries our identity."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch._dynamo.utils import counters

from vllm_xdsl import cache_key, ops
from vllm_xdsl.compile import RESULTS


def _layer(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return ops.static_scaled_fp8_quant(ops.rms_norm(x, w, 1e-6), s).float() * s


@pytest.fixture
def fresh_caches() -> Iterator[None]:
    from torch._inductor.utils import fresh_cache

    # torch's own patch() restores by setattr; pytest's monkeypatch would delattr entries
    # that are not in the module's __dict__ and hide them for the rest of the process.
    with (torch._functorch.config.patch(enable_autograd_cache=True),
          torch._inductor.config.patch(fx_graph_cache=True), fresh_cache()):
        yield


def _compile(fn: Any, options: dict[str, Any] | None = None,
             backend: str = "vllm_xdsl") -> tuple[torch.Tensor, int, int]:
    """Output, our pipeline runs and AOTAutograd cache hits of one fresh compile."""
    torch.manual_seed(0)
    args = (torch.randn(5, 64), torch.randn(64), torch.tensor([0.05]))
    torch._dynamo.reset()  # a fresh Dynamo, as in a new process; the on-disk caches stay
    runs, hits = RESULTS.count, counters["aot_autograd"]["autograd_cache_hit"]
    kwargs = {"options": options} if options is not None else {}
    out = torch.compile(fn, backend=backend, **kwargs)(*args)
    return out, RESULTS.count - runs, counters["aot_autograd"]["autograd_cache_hit"] - hits


def test_a_second_compile_loads_the_graph_and_computes_the_same(fresh_caches: None) -> None:
    first, runs, hits = _compile(_layer, {"target": "cpu"})
    assert (runs, hits) == (1, 0)
    second, runs, hits = _compile(_layer, {"target": "cpu"})
    assert (runs, hits) == (0, 1)  # our passes did not run: the compiled graph was loaded
    assert torch.equal(first, second)


def test_plain_inductors_entry_is_not_ours(fresh_caches: None) -> None:
    _compile(_layer, backend="inductor")
    _, runs, hits = _compile(_layer, {"target": "cpu"})
    assert (runs, hits) == (1, 0)


def test_other_options_or_other_source_miss(fresh_caches: None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _compile(_layer, {"target": "cpu"})
    _, runs, hits = _compile(_layer, {"target": "cpu", "passes": ["raise-native"]})
    assert (runs, hits) == (1, 0)
    monkeypatch.setattr(cache_key, "source_hash", lambda: "an edited checkout")
    _, runs, hits = _compile(_layer, {"target": "cpu"})
    assert (runs, hits) == (1, 0)
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "rms_norm=native")
    _, runs, hits = _compile(_layer, {"target": "cpu"})
    assert (runs, hits) == (1, 0)
    with ops.priority("static_scaled_fp8_quant=native"):
        _, runs, hits = _compile(_layer, {"target": "cpu"})
    assert (runs, hits) == (1, 0)


def test_dumps_and_reports_always_run_the_passes(fresh_caches: None, tmp_path: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    report = {"target": "cpu", "pass_options": {"lower-dispatch": {"report": True}}}
    assert [_compile(_layer, report)[1:] for _ in range(2)] == [(1, 0), (1, 0)]
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    assert [_compile(_layer, {"target": "cpu"})[1:] for _ in range(2)] == [(1, 0), (1, 0)]


def test_a_users_custom_pass_still_runs_and_keys_the_cache() -> None:
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class Mine(CustomGraphPass):
        def __init__(self) -> None:
            self.calls = 0

        def __call__(self, graph: torch.fx.graph.Graph) -> None:
            self.calls += 1

        def uuid(self) -> Any:
            return "mine-1"

    mine = Mine()
    key = cache_key.PipelineKey("ours", mine)
    key(torch.fx.Graph())
    assert mine.calls == 1 and key.uuid() == ("vllm_xdsl", "ours", "mine-1")
    assert cache_key.PipelineKey("ours", None).uuid() == ("vllm_xdsl", "ours", "")
    with torch._inductor.config.patch(post_grad_custom_pre_pass=lambda graph: None):
        with cache_key.keyed_config(None) as cacheable:
            assert not cacheable  # a plain callable: Inductor bypasses its caches anyway


_SECOND_PROCESS = """
import sys, torch
torch._inductor.config.compile_threads = 1
torch._functorch.config.enable_autograd_cache = True
torch._inductor.config.fx_graph_cache = True

def norm(x, w):
    v = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(v + 1e-5)).to(x.dtype) * w

torch.manual_seed(0)
x, w = torch.randn(3, 16, dtype=torch.bfloat16), torch.randn(16, dtype=torch.bfloat16)
torch.compile(norm, backend="vllm_xdsl")(x, w)
print(sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in ("xdsl", "vllm_xdsl")}),
      "vllm_xdsl.pipeline" in sys.modules)
"""


def test_a_process_served_by_the_cache_never_imports_xdsl(tmp_path: Any) -> None:
    """The first process compiles (and imports xDSL, the passes); a second one, whose graph
    AOTAutograd's cache serves, loads neither: ~0.3 s of its start-up (issue 17)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", _SECOND_PROCESS], env=env, text=True,
                           capture_output=True, timeout=600, check=True).stdout.split("\n")[-2]
            for _ in range(2)]
    assert runs == ["['vllm_xdsl', 'xdsl'] True", "['vllm_xdsl'] False"]
