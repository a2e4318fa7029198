"""Compile time of the whole vllm-xdsl pipeline vs Inductor, per stage, 1 to 64 layers (issues
8 and 17).

    python bench/compile_pipeline.py [--layers 1,8,32,64] [--inductor-layers 1,8,32]
                                     [--repeat 3] [--json out.json] [--profile 32]

The model is the bundled Llama-style decoder (vllm_xdsl/models) at Llama-3-8B sizes:
hidden 4096, intermediate 14336, 32 heads, bf16, linears fed through fp8 static quant.
It is built under FakeTensorMode: no weight is allocated or downloaded (64 layers of real
weights would be ~31 GB). Dynamo + AOTAutograd capture it exactly as the `vllm_xdsl`
backend would (`dynamic=True`, Inductor's decompositions), and inside that forward
compiler, on the very graph the backend gets:

- ours: import -> raise-native -> fuse-norm-quant -> lower-dispatch (target cpu) ->
  export, each stage timed (`verify` = the one module.verify() after the passes that the
  backend runs; `counts` = the op counts after each pass), best of --repeat; the whole is
  also timed through the
  backend's own `vllm_xdsl.compile.transform` and checked to print/parse no IR text;
- Inductor: `compile_fx_inner` on the same graph (what Inductor does after AOTAutograd:
  post-grad passes, lowering, scheduling, C++ codegen and compile), with the FX graph
  cache off and a fresh cache directory, once per size.

A 1-layer graph is compiled first by both (imports, first-use initialisation: reported
as "cold", not counted). Inductor sizes that are not measured are extrapolated linearly
from the measured ones (the output says so).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch import nn

from vllm_xdsl.models import DecoderConfig, TinyDecoder

HIDDEN, INTERMEDIATE, HEADS = 4096, 14336, 32
TOKENS = 16  # the example token count; the graph is dynamic in it
STAGES = ("import", "raise-native", "fuse-norm-quant", "lower-dispatch", "verify", "counts",
          "export")
# Issue 17's (issue 8 asked for 5 % of Inductor; issue 17 for 3 %).
TARGETS = {"share_of_inductor_32": 0.03, "growth_32_64": 2.2, "seconds_32": 1.0}


# --- the model, captured without weights --------------------------------------------------


def fake_model(layers: int) -> tuple[nn.Module, torch.Tensor]:
    """The decoder and its token ids as fake tensors (bf16 weights, fp32 -> bf16 per param:
    Module.to() cannot swap fake parameters)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    cfg = DecoderConfig(hidden=HIDDEN, intermediate=INTERMEDIATE, heads=HEADS, layers=layers)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = TinyDecoder(cfg).eval()
        for mod in model.modules():
            for table in (mod._parameters, mod._buffers):
                for key, t in table.items():
                    if t is not None and t.is_floating_point():
                        t = t.to(torch.bfloat16)
                        table[key] = nn.Parameter(t, False) if table is mod._parameters else t
        ids = torch.randint(0, cfg.vocab, (TOKENS,))
    return model, ids


def with_graph(layers: int, fn: Callable[[torch.fx.GraphModule, list[Any]], Any]) -> Any:
    """Capture the model as the backend would and call fn(graph, example_inputs) inside the
    forward compiler (Inductor needs that tracing context); returns fn's result."""
    from vllm_xdsl.frontend.capture import aot_backend

    model, ids = fake_model(layers)
    out: list[Any] = []

    def forward(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        out.append(fn(gm, example_inputs))
        return gm

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=aot_backend(forward), dynamic=True, fullgraph=True)
    with torch.no_grad():
        compiled(ids)
    return out[0]


# --- ours ---------------------------------------------------------------------------------


class TextGuard:
    """Counts xDSL Parser/Printer constructions while active: the compile path must not
    print and re-parse IR text."""

    def __enter__(self) -> TextGuard:
        from xdsl.parser import Parser
        from xdsl.printer import Printer

        self.count = 0
        self._saved = [(cls, cls.__init__) for cls in (Parser, Printer)]
        for cls, init in self._saved:
            def counting(obj: Any, *a: Any, _init: Callable = init, **k: Any) -> None:
                self.count += 1
                _init(obj, *a, **k)
            cls.__init__ = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, init in self._saved:
            cls.__init__ = init  # type: ignore[method-assign]


def stage_times(gm: torch.fx.GraphModule) -> tuple[dict[str, float], dict[str, int]]:
    """Seconds per stage of one run of the pipeline, as transform runs it (verified once,
    after the passes), and the op counts at the end."""
    from vllm_xdsl.backends.torch_export import export_module
    from vllm_xdsl.dialects import make_context
    from vllm_xdsl.frontend import import_graph
    from vllm_xdsl.pipeline import DEFAULT_PASSES, PipelineOptions, make_pass, op_counts

    t: dict[str, float] = dict.fromkeys(STAGES, 0.0)
    options = PipelineOptions(target="cpu")
    t0 = time.perf_counter()
    imported = import_graph(gm)
    t["import"] = time.perf_counter() - t0
    ctx = make_context()
    for name in DEFAULT_PASSES:
        p = make_pass(name, options)
        if p is None:
            raise SystemExit(f"compile_pipeline: pass {name} is not available")
        t0 = time.perf_counter()
        p.apply(ctx, imported.module)
        t1 = time.perf_counter()
        counts = op_counts(imported.module)
        t[name] += t1 - t0
        t["counts"] += time.perf_counter() - t1
    t0 = time.perf_counter()
    imported.module.verify()
    t["verify"] = time.perf_counter() - t0
    values = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    t0 = time.perf_counter()
    export_module(imported.module, gm, values)
    t["export"] = time.perf_counter() - t0
    return t, dict(counts)


def ours(gm: torch.fx.GraphModule, repeat: int) -> dict[str, Any]:
    """Best-of-`repeat` stage times and whole-transform time on `gm`."""
    from vllm_xdsl.compile import transform
    from vllm_xdsl.pipeline import PipelineOptions

    runs = [stage_times(gm) for _ in range(repeat)]
    stages = {k: min(r[0][k] for r in runs) for k in STAGES}
    wholes = []
    with TextGuard() as guard:
        for _ in range(repeat):
            t0 = time.perf_counter()
            transform(gm, PipelineOptions(target="cpu"))
            wholes.append(time.perf_counter() - t0)
    return {"stages": stages, "whole": min(wholes), "text_parsed_or_printed": guard.count,
            "fx_nodes": len(gm.graph.nodes), "ops_after": runs[0][1]}


def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> float:
    """Seconds for compile_fx_inner on `gm`, caches off (fresh cache dir)."""
    import torch._inductor.config as inductor_config
    from torch._guards import TracingContext
    from torch._inductor.compile_fx import compile_fx_inner

    context = TracingContext.try_get()
    if context is not None:
        context.output_strides.clear()
    with tempfile.TemporaryDirectory() as cache, inductor_config.patch(fx_graph_cache=False):
        saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        try:
            t0 = time.perf_counter()
            compile_fx_inner(gm, example_inputs)
            return time.perf_counter() - t0
        finally:
            if saved is None:
                del os.environ["TORCHINDUCTOR_CACHE_DIR"]
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


def profile(gm: torch.fx.GraphModule, top: int) -> str:
    """cProfile of one whole transform: the top functions by own and cumulative time."""
    from vllm_xdsl.compile import transform
    from vllm_xdsl.pipeline import PipelineOptions

    prof = cProfile.Profile()
    prof.enable()
    transform(gm, PipelineOptions(target="cpu"))
    prof.disable()
    out = io.StringIO()
    for key in ("tottime", "cumulative"):
        stats = pstats.Stats(prof, stream=out).strip_dirs().sort_stats(key)
        stats.print_stats(top)
    return out.getvalue()


# --- report -------------------------------------------------------------------------------


def linear_fit(points: dict[int, float]) -> Callable[[int], float]:
    xs, ys = list(points), list(points.values())
    if len(xs) == 1:
        return lambda n: ys[0] * n / xs[0]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)
    return lambda n: my + slope * (n - mx)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def parse_sizes(text: str) -> list[int]:
    try:
        return sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise SystemExit(f"compile_pipeline: expected comma-separated layer counts, got {text!r}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default="1,8,32,64")
    parser.add_argument("--inductor-layers", default="1,8,32",
                        help="sizes Inductor compiles (others are extrapolated); '' for none")
    parser.add_argument("--repeat", type=int, default=3, help="runs of ours per size (best)")
    parser.add_argument("--json", help="write the numbers here (bench/run_all.py plots them)")
    parser.add_argument("--profile", type=int, default=0, metavar="LAYERS",
                        help="print a cProfile of the whole transform at this size")
    args = parser.parse_args()
    sizes, ind_sizes = parse_sizes(args.layers), parse_sizes(args.inductor_layers)
    if args.repeat < 1 or not sizes:
        raise SystemExit("compile_pipeline: --repeat must be >= 1 and --layers non-empty")

    print(f"model: Llama-style decoder, hidden {HIDDEN}, intermediate {INTERMEDIATE}, "
          f"{HEADS} heads, bf16, fp8 static-quant linears, fake weights, dynamic tokens")
    print(f"machine: {os.cpu_count()} cores, torch {torch.__version__}; {load()} at start")

    def warm(gm: torch.fx.GraphModule, ex: list[Any]) -> tuple[float, float]:
        t0 = time.perf_counter()
        stage_times(gm)
        return time.perf_counter() - t0, inductor(gm, ex)

    cold = with_graph(1, warm)
    print(f"cold (first graph in the process, 1 layer): ours {cold[0] * 1e3:.0f} ms, "
          f"Inductor {cold[1]:.1f} s (not counted below)")

    results: dict[int, dict[str, Any]] = {}
    header = "  ".join(f"{s:>8}" for s in STAGES)
    print(f"\nours, ms (best of {args.repeat}); whole = vllm_xdsl.compile.transform")
    print(f"{'layers':>6} {'nodes':>6}  {header}  {'whole':>8}  {'ms/layer':>8}  {'inductor s':>10}")
    for n in sizes:
        def measure(gm: torch.fx.GraphModule, ex: list[Any], n: int = n) -> dict[str, Any]:
            r = ours(gm, args.repeat)
            if args.profile == n:
                r["profile"] = profile(gm, 25)
            r["inductor"] = inductor(gm, ex) if n in ind_sizes else None
            r["load"] = os.getloadavg()[0]
            return r

        r = results[n] = with_graph(n, measure)
        cells = "  ".join(f"{r['stages'][s] * 1e3:8.1f}" for s in STAGES)
        ind = f"{r['inductor']:10.1f}" if r["inductor"] is not None else f"{'-':>10}"
        print(f"{n:>6} {r['fx_nodes']:>6}  {cells}  {r['whole'] * 1e3:8.1f}  "
              f"{r['whole'] / n * 1e3:8.1f}  {ind}   (load {r['load']:.1f})", flush=True)

    last = results[sizes[-1]]
    print(f"\nops after the pipeline ({sizes[-1]} layers): "
          + ", ".join(f"{k} x{v}" for k, v in sorted(last["ops_after"].items())))
    texts = sum(r["text_parsed_or_printed"] for r in results.values())
    print(f"IR text printed or parsed on the compile path: {texts} times")

    summary = report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"sizes": sizes, "stages": list(STAGES), "cold": cold,
                       "results": {str(k): {kk: vv for kk, vv in v.items() if kk != "profile"}
                                   for k, v in results.items()},
                       "summary": summary, "load_end": load(),
                       "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024},
                      f, indent=1)
    for n, r in results.items():
        if "profile" in r:
            print(f"\ncProfile of one whole transform at {n} layers:\n{r['profile']}")
    print(f"\npeak RSS of this process: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; {load()} at end")


def report(results: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Print the ratios and the targets; return them."""
    whole = {n: r["whole"] for n, r in results.items()}
    measured = {n: r["inductor"] for n, r in results.items() if r["inductor"] is not None}
    summary: dict[str, Any] = {}
    print()
    if measured:
        fit = linear_fit(measured)
        for n in sorted(whole):
            ind, how = (measured[n], "measured") if n in measured else (fit(n), "extrapolated")
            summary[f"share_of_inductor_{n}"] = whole[n] / ind
            print(f"ours / Inductor at {n:>2} layers: {whole[n]:.3f} s / {ind:.1f} s "
                  f"({how}) = {whole[n] / ind * 100:.2f} %")
        summary["inductor_32_measured"] = 32 in measured
    if 32 in whole and 64 in whole:
        summary["growth_32_64"] = whole[64] / whole[32]
        print(f"growth 32 -> 64 layers: {summary['growth_32_64']:.2f}x")
    elif len(whole) >= 2:  # reduced runs: the growth between the two largest sizes
        a, b = sorted(whole)[-2:]
        print(f"growth {a} -> {b} layers: {whole[b] / whole[a]:.2f}x for {b / a:.0f}x the "
              f"layers (32 -> 64 is measured with --layers ...,32,64)")
    if 32 in whole:
        summary["seconds_32"] = whole[32]
    print("targets:")
    for key, limit in TARGETS.items():
        if key in summary:
            ok = "met" if summary[key] <= limit else "NOT met"
            print(f"  {key} = {summary[key]:.3f} (target <= {limit}): {ok}")
    return summary


if __name__ == "__main__":
    main()
