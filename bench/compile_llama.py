"""First-call compile time on an HF transformers Llama: plain Inductor vs vllm_xdsl (issue 17).

    python bench/compile_llama.py [--layers 2,8] [--rounds 2] [--mode same,fresh]
                                  [--json out.json]

The model is `transformers.LlamaForCausalLM` from a random config built here (hidden 256,
intermediate 512, 4 heads / 2 kv heads, vocab 256, bf16, no hub), called on 16 token ids
with `use_cache=False` under no_grad, `torch.compile(dynamic=True, fullgraph=True)`.

Both sides are compiled with every cache off: `fx_graph_cache=False`, AOTAutograd's cache
off, a fresh TORCHINDUCTOR_CACHE_DIR and cleared in-memory code caches per compile
(`torch._inductor.utils.fresh_cache`), `compile_threads=1` (so that the C++ compiles are
child processes whose CPU time getrusage can count).

- `same`: one process, variants interleaved (inductor, ours, inductor, ours, ...) after
  a 1-layer warm-up of each (imports and first-use initialisation are not counted);
- `fresh`: each compile in a fresh subprocess (`--one VARIANT LAYERS`), alternating,
  imports counted: "ours import" is what the backend's entry point loads beyond torch and
  Dynamo (which either backend imports before the timed call); the passes and xDSL load
  during the compile when it needs them. "process cpu/wall (whole)" count the whole
  process after the interpreter's start (torch's import included, for both);
- `warm`: caches ON (FX graph cache, AOTAutograd cache), one fresh cache directory per
  variant and round: a first process fills it, a second process is timed.

Per compile: wall seconds, process CPU seconds (self; children = the C++ compiler), and
the phases from torch's own `dynamo_timed` counters (torch._dynamo.utils
.compilation_time_metrics) plus the pipeline's stage timings (vllm_xdsl.compile.RESULTS):
dynamo = compile_inner - call_user_compiler; aot = the backend minus its forward
compiler; inductor = compile_fx_inner; for plain Inductor also its pre-grad and
joint-graph passes (ours runs them too, after export, as Inductor's forward step); for
ours import / passes / export of `transform`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

VARIANTS = ("inductor", "ours")
TOKENS = 16


def build_model(layers: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        use_cache=False,
    )
    return LlamaForCausalLM(cfg).to(torch.bfloat16).eval()


def _caches_off() -> None:
    import torch

    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    torch._inductor.config.compile_threads = 1


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _metric(name: str) -> float:
    from torch._dynamo.utils import compilation_time_metrics

    return sum(compilation_time_metrics.get(name, []))


def compile_once(variant: str, layers: int, warm: bool = False) -> dict[str, Any]:
    """Compile and call the model once; wall, CPU and per-phase seconds. With `warm`,
    the caches stay on, in the TORCHINDUCTOR_CACHE_DIR the caller set."""
    import torch
    from torch._dynamo.utils import compilation_time_metrics
    from torch._inductor.utils import fresh_cache

    if warm:
        torch._inductor.config.compile_threads = 1
    else:
        _caches_off()
    model = build_model(layers)
    ids = torch.randint(0, 256, (1, TOKENS))
    torch._dynamo.reset()
    compilation_time_metrics.clear()
    transform_s = [0.0]
    mark = 0
    if variant == "ours":
        import vllm_xdsl.compile as backend

        mark = len(backend.RESULTS)
        original = backend.transform

        def timed(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                transform_s[0] += time.perf_counter() - start

        backend.transform = timed  # type: ignore[assignment]
        compiled = torch.compile(model, backend="vllm_xdsl", options={"inner": "inductor"},
                                 dynamic=True, fullgraph=True)
    else:
        compiled = torch.compile(model, backend="inductor", dynamic=True, fullgraph=True)
    try:
        with contextlib.nullcontext() if warm else fresh_cache(), torch.no_grad():
            cpu0, child0, wall0 = time.process_time(), _children_cpu(), time.perf_counter()
            compiled(ids, use_cache=False)
            wall = time.perf_counter() - wall0
            cpu, child = time.process_time() - cpu0, _children_cpu() - child0
    finally:
        if variant == "ours":
            backend.transform = original  # type: ignore[assignment]
    backend_s = _metric("OutputGraph.call_user_compiler")
    inductor_s = _metric("compile_fx_inner")
    phases = {
        "dynamo": _metric("_compile.compile_inner") - backend_s,
        "inductor compile_fx_inner": inductor_s,
        "post-grad passes": _metric("_recursive_post_grad_passes"),
        "joint-graph passes": _metric("_recursive_joint_graph_passes"),
    }
    if variant == "ours":
        forward_s = transform_s[0] + inductor_s + phases["joint-graph passes"]
        phases["aot"] = backend_s - forward_s
        phases["ours transform"] = transform_s[0]
        for result in backend.RESULTS[mark:]:
            for stage, s in result.seconds.items():
                key = f"ours {stage}" if stage in ("import", "export") else "ours passes"
                phases[key] = phases.get(key, 0.0) + s
    else:
        forward_s = _metric("compile_fx.<locals>.fw_compiler_base")
        phases["aot"] = backend_s - forward_s
        phases["pre-grad passes"] = _metric("_recursive_pre_grad_passes")
    phases["backend (total)"] = backend_s
    return {"variant": variant, "layers": layers, "wall": wall, "cpu": cpu, "children_cpu": child,
            "phases": phases}


def _fresh(variant: str, layers: int, cache_dir: str | None = None) -> dict[str, Any]:
    """One compile in a fresh process; with `cache_dir`, caches on in that directory."""
    env = dict(os.environ)
    extra = []
    if cache_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
        extra = ["--warm"]
    out = subprocess.run([sys.executable, __file__, "--one", variant, str(layers), *extra],
                         capture_output=True, text=True, timeout=1800, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _one(variant: str, layers: int, warm: bool) -> None:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401  (torch.compile imports it for either backend)
    import transformers  # noqa: F401

    torch_import = time.perf_counter() - wall0
    ours_import = 0.0
    if variant == "ours":  # what torch's lookup of backend="vllm_xdsl" imports; the
        start = time.perf_counter()  # passes and xDSL load in the compile, if it needs them
        import vllm_xdsl.compile  # noqa: F401
        ours_import = time.perf_counter() - start
    rec = compile_once(variant, layers, warm)
    rec["phases"]["ours import"] = ours_import
    rec["torch import"] = torch_import
    rec["wall"] += ours_import
    rec["process cpu (whole)"] = time.process_time() - cpu0
    rec["process wall (whole)"] = time.perf_counter() - wall0
    print(json.dumps(rec))


def _row(recs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in recs)


def _report(label: str, layers: int, recs: list[dict[str, Any]]) -> dict[str, Any]:
    by = {v: [r for r in recs if r["variant"] == v] for v in VARIANTS}
    print(f"\n## {label}, {layers} layers ({len(by['ours'])} compiles each, medians)")
    print(f"{'':28}{'inductor':>10}{'ours':>10}{'ratio':>8}")
    summary: dict[str, Any] = {"records": recs}
    keys = ["wall", "cpu", "children_cpu"]
    if all("process cpu (whole)" in r for r in recs):  # fresh: with the imports
        keys += ["process cpu (whole)", "process wall (whole)"]
    for key in keys:
        a, b = _row(by["inductor"], key), _row(by["ours"], key)
        summary[key] = {"inductor": a, "ours": b, "ratio": b / a}
        print(f"{key:28}{a:10.2f}{b:10.2f}{b / a:8.3f}")
    names = sorted({k for r in recs for k in r["phases"]})
    for name in names:
        vals = [statistics.median(r["phases"].get(name, 0.0) for r in by[v]) for v in VARIANTS]
        summary[name] = dict(zip(VARIANTS, vals, strict=True))
        print(f"  {name:26}{vals[0]:10.2f}{vals[1]:10.2f}")
    print("  all walls: " + "  ".join(f"{r['variant'][0]}{r['wall']:.1f}" for r in recs))
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", default="2,8", help="comma-separated, e.g. 2,8,32")
    ap.add_argument("--rounds", type=int, default=2, help="compiles per variant and size")
    ap.add_argument("--mode", default="same,fresh", help="comma-separated: same, fresh, warm")
    ap.add_argument("--json", help="write the medians here")
    ap.add_argument("--one", nargs=2, metavar=("VARIANT", "LAYERS"), help=argparse.SUPPRESS)
    ap.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        _one(args.one[0], int(args.one[1]), args.warm)
        return
    sizes = [int(x) for x in args.layers.split(",")]
    modes = args.mode.split(",")
    print(f"load average {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}")
    out: dict[str, Any] = {}
    if "same" in modes:
        for v in VARIANTS:
            compile_once(v, 1)  # warm-up: imports, first-use initialisation
        for layers in sizes:
            recs = [compile_once(v, layers) for _ in range(args.rounds) for v in VARIANTS]
            out[f"same/{layers}"] = _report("same process", layers, recs)
    if "fresh" in modes:
        for layers in sizes:
            recs = [_fresh(v, layers) for _ in range(args.rounds) for v in VARIANTS]
            out[f"fresh/{layers}"] = _report("fresh processes", layers, recs)
    if "warm" in modes:  # per variant and round: a fresh cache dir, filled, then timed
        for layers in sizes:
            recs = []
            for _ in range(args.rounds):
                for v in VARIANTS:
                    with tempfile.TemporaryDirectory() as cache_dir:
                        _fresh(v, layers, cache_dir)
                        recs.append(_fresh(v, layers, cache_dir))
            out[f"warm/{layers}"] = _report("warm-cache second process", layers, recs)
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
