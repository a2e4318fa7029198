"""Plain vLLM against vLLM with our compiler, side by side in one run (CPU build).

Each variant starts its engine in its own child process with empty compile caches
(VLLM_CACHE_ROOT, TORCHINDUCTOR_CACHE_DIR, VLLM_XDSL_CACHE_DIR in fresh temporary dirs;
`--kernel-cache warm` instead builds our kernel libraries once, before the first start, and
shares them, as a user's cache holds them after a first use or a prebuild), variants
interleaved over the rounds so machine load hits them alike. Measured per start:
engine start-up (LLM construction), prefill step (a prompt of N tokens, max_tokens=1) and
decode step ((t(M) - t(1)) / (M - 1) over M greedy tokens), plus the generated tokens,
which must equal plain vLLM's. Within a start each step time is the best of --reps
repetitions: other work on a shared machine only ever slows a step down (vLLM serves
with one torch thread, so one other busy process on 2 cores can double every step of a
start). Across starts the table shows the median.

    .venv-vllm/bin/python bench/vllm_side_by_side.py --models llama --rounds 2
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The engine runner and the model checkpoints are the in-vLLM tests' (test/helpers), which
# this benchmark runs as they do: test/ on the path once, as for bench/corpus_table.py.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))

from helpers.vllm_models_config import MODELS, write_checkpoint  # noqa: E402

# Llama, hidden 2048, 4 layers, 16 heads of 128, vocabulary 4096 (so that the LM head, a
# bf16 GEMM none of the schemes quantize, stays a small part of a step), bf16. Every
# projection fits vLLM's AMX int8 rule (K % 32 == 0, N % 16 == 0).
LLAMA_2048: dict[str, Any] = {
    "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 4,
    "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 128,
    "vocab_size": 4096, "max_position_embeddings": 512,
}
# name -> (checkpoint of vllm_models_config, vLLM's `quantization` argument, shapes)
BENCH_MODELS: dict[str, tuple[str, str | None, dict[str, Any]]] = {
    "llama2048_int8_static": ("llama_int8_static", None, LLAMA_2048),
    "llama2048_int8_dynamic": ("llama_int8_dynamic", None, LLAMA_2048),
    "llama2048_fp8_per_channel": ("llama", "fp8_per_channel", LLAMA_2048),
}
# torch.profiler op names that say which kernels a step ran (counted per step)
KEY_OPS = ("_C::onednn_scaled_mm", "_C::int8_scaled_mm_with_quant",
           "_C::static_scaled_int8_quant", "_C::dynamic_scaled_int8_quant",
           "aten::_scaled_mm", "vllm_xdsl_cpu::")

WAYS = ("plain", "backend", "post_grad")
# Not run unless asked for: the backend with vLLM's custom ops off, as vLLM's own Inductor
# config has them (for any other backend vLLM turns them all on: rotary then runs as
# `_C.rotary_embedding` between our graph's kernels instead of fused into them).
# And the backend configured as vLLM's CPU platform configures its own Inductor
# (platforms/cpu.py): custom ops off, and the Inductor settings that torch reads from the
# environment (size asserts off: ~1 us per input per step; dynamic threads on). vLLM applies
# them only to its Inductor backend, and passes no options to any other.
EXTRA_WAYS = ("backend_custom_ops_none", "backend_as_inductor")
_WAY_ENV = {"backend_as_inductor": {"TORCHINDUCTOR_SIZE_ASSERTS": "0",
                                    "TORCHINDUCTOR_CPP_DYNAMIC_THREADS": "1"}}


def _compilation_config(way: str) -> dict[str, Any] | None:
    way = way.split("@")[0]  # the priority travels in the environment
    if way == "plain":
        return None
    if way == "backend":
        return {"mode": 2, "backend": "vllm_xdsl"}
    if way in ("backend_custom_ops_none", "backend_as_inductor"):
        return {"mode": 2, "backend": "vllm_xdsl", "custom_ops": ["none"]}
    import vllm_xdsl

    return {"inductor_compile_config": {"post_grad_custom_post_pass": vllm_xdsl.post_grad_pass()}}


def _timed(llm: Any, prompt: list[int], max_tokens: int, reps: int) -> tuple[float, list[int]]:
    from vllm import SamplingParams, TokensPrompt

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    times, tokens = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = llm.generate([TokensPrompt(prompt_token_ids=prompt)], params, use_tqdm=False)
        times.append(time.perf_counter() - t0)
        tokens = list(out[0].outputs[0].token_ids)
    return min(times), tokens


def _profile(llm: Any, prompt: list[int], max_tokens: int, steps: int) -> dict[str, Any]:
    """torch.profiler's ops of one generate, per step: count and self CPU microseconds."""
    import torch
    from vllm import SamplingParams, TokensPrompt

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        llm.generate([TokensPrompt(prompt_token_ids=prompt)], params, use_tqdm=False)
        wall = time.perf_counter() - t0
    ops = {e.key: (e.count / steps, e.self_cpu_time_total / steps)
           for e in prof.key_averages()}
    top = sorted(ops.items(), key=lambda kv: -kv[1][1])[:25]
    return {"wall_us": wall * 1e6 / steps,
            "key_counts": {k: sum(c for n, (c, _) in ops.items() if n.startswith(k))
                           for k in KEY_OPS},
            "top": [[n, round(c, 2), round(us, 1)] for n, (c, us) in top]}


def _pipeline_counts() -> list[dict[str, Any]]:
    """Per graph our compiler took: its vllm ops after raising and after fusing, and the
    non-torch ops after lowering (the provider's), from vllm_xdsl.compile.RESULTS."""
    from vllm_xdsl.compile import RESULTS

    graphs = []
    for result in RESULTS.since(0):
        stages = {st.name: st.op_counts for st in result.stages}
        last = result.stages[-1].op_counts if result.stages else {}
        graphs.append({
            "raised": {k: v for k, v in stages.get("raise-native", {}).items()
                       if k.startswith("vllm.")},
            "fused": {k: v for k, v in stages.get("fuse-norm-quant", {}).items()
                      if k.startswith("vllm.")},
            "lowered": {k: v for k, v in last.items()
                        if not k.startswith(("torch.", "func.", "builtin."))},
            "dispatch": (result.report or "")[:2000],
        })
    return graphs


def child(args: argparse.Namespace) -> None:
    """One engine start and its measurements; prints one JSON line."""
    import torch

    if args.amx == "off":  # before vLLM picks its kernels (module doc)
        torch.cpu._is_amx_tile_supported = lambda: False
    from vllm import LLM

    load0 = os.getloadavg()[0]
    kwargs: dict[str, Any] = {
        "model": args.ckpt,
        "skip_tokenizer_init": True,
        "gpu_memory_utilization": 0.1,
        "max_model_len": 512,
    }
    if args.quantization:
        kwargs["quantization"] = args.quantization
    config = _compilation_config(args.way)
    if config is not None:
        kwargs["compilation_config"] = config
    t0 = time.perf_counter()
    llm = LLM(**kwargs)
    startup = time.perf_counter() - t0
    prefill_prompt = [(7 * i + 3) % 256 for i in range(args.prefill_tokens)]
    decode_prompt = prefill_prompt[:8]
    _timed(llm, decode_prompt, 2, 1)  # warm-up: first-call shapes out of the timed steps
    prefill, _ = _timed(llm, prefill_prompt, 1, args.reps)
    t1, _ = _timed(llm, decode_prompt, 1, args.reps)
    tm, tokens = _timed(llm, decode_prompt, args.decode_tokens, args.reps)
    decode = (tm - t1) / (args.decode_tokens - 1)
    result: dict[str, Any] = {
        "startup": startup, "prefill": prefill, "decode": decode, "tokens": tokens,
        "torch_threads": torch.get_num_threads(), "affinity": sorted(os.sched_getaffinity(0)),
        "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "priority": os.environ.get("VLLM_XDSL_PRIORITY"),
        "cpu": torch.backends.cpu.get_cpu_capability(),
        "amx_seen_by_vllm": torch.cpu._is_amx_tile_supported(),
    }
    if args.profile:
        result["profile_prefill"] = _profile(llm, prefill_prompt, 1, 1)
        result["profile_decode"] = _profile(llm, decode_prompt, args.decode_tokens,
                                            args.decode_tokens)
    if args.way != "plain":
        result["graphs"] = _pipeline_counts()
    print("RESULT " + json.dumps(result), flush=True)


def _run_variant(model: str, way: str, ckpt: Path, args: argparse.Namespace,
                 amx: str, kernel_cache: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"vllm-bench-{way}-") as tmp:
        env = dict(os.environ)
        env.update(
            VLLM_ENABLE_V1_MULTIPROCESSING="0",
            VLLM_CACHE_ROOT=f"{tmp}/vllm",
            TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor",
            VLLM_XDSL_CACHE_DIR=kernel_cache or f"{tmp}/xdsl",
        )
        env.update(_WAY_ENV.get(way.split("@")[0], {}))
        env.pop("VLLM_XDSL_PRIORITY", None)
        if "@" in way:
            env["VLLM_XDSL_PRIORITY"] = way.split("@")[1]
        if args.eager_rounding:
            env["TORCHINDUCTOR_EMULATE_PRECISION_CASTS"] = "1"
        quantization = BENCH_MODELS[model][1] if model in BENCH_MODELS else None
        cmd = [sys.executable, __file__, "--child", "--way", way, "--ckpt", str(ckpt),
               "--prefill-tokens", str(args.prefill_tokens), "--amx", amx,
               "--decode-tokens", str(args.decode_tokens), "--reps", str(args.reps)]
        cmd += ["--quantization", quantization] if quantization else []
        cmd += ["--profile"] if args.profile else []
        if args.cpus:
            cmd = ["taskset", "-c", args.cpus, *cmd]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                  timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"no result within {args.timeout} s"}
    log = proc.stdout + proc.stderr
    if args.log_dir:
        Path(args.log_dir).mkdir(parents=True, exist_ok=True)
        (Path(args.log_dir) / f"{model}-amx_{amx}-{way}-{int(time.time())}.log").write_text(log)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = log.strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {proc.returncode}: {tail[0][:200]}"}
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    # the backend (compile.py) and the post-grad pass each log one warning per graph they
    # could not take
    result["fallbacks"] = sum(
        ln.startswith("vllm_xdsl:")
        and ("running the unmodified graph" in ln or "graph left unchanged" in ln)
        for ln in log.splitlines()
    )
    return result


def _warm_kernel_cache(cpus: str | None) -> str:
    """A cache directory holding the cpu provider's built kernels (built now, timed), for
    every start to share: the first use's build is then no start's."""
    cache = tempfile.mkdtemp(prefix="vllm-bench-kernels-")
    atexit.register(shutil.rmtree, cache, True)  # removed with the run, like each start's
    cmd = [sys.executable, "-m", "vllm_xdsl.backends.cuda.build", "cpu"]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env={**os.environ, "VLLM_XDSL_CACHE_DIR": cache},
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"error: the cpu kernels did not build: {proc.stderr.strip()[-300:]}")
    print(f"# kernel cache {cache}: the cpu kernels built in {time.perf_counter() - t0:.1f} s "
          "before the first start", flush=True)
    return cache


def _available_ways(ways: list[str]) -> tuple[list[str], list[str]]:
    notes = []
    kept = []
    for way in ways:
        if way == "post_grad":
            import importlib.util

            spec = importlib.util.find_spec("vllm_xdsl")
            import vllm_xdsl

            if spec is None or not hasattr(vllm_xdsl, "post_grad_pass"):
                notes.append("post_grad: skipped, vllm_xdsl.post_grad_pass is not in this tree")
                continue
        kept.append(way)
    return kept, notes


def _summary(runs: list[dict[str, Any]]) -> str:
    """Kernel counts per decode step and what our compiler raised, fused and lowered."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return ""
    parts = []
    prof = ok[-1].get("profile_decode")
    if prof:
        counts = {k: round(v, 1) for k, v in prof["key_counts"].items() if v}
        parts.append(f"decode-step kernels {counts}")
    graphs = ok[-1].get("graphs")
    if graphs:
        def total(key: str) -> dict[str, int]:
            out: dict[str, int] = {}
            for g in graphs:
                for k, v in g[key].items():
                    out[k] = out.get(k, 0) + v
            return out
        parts.append(f"{len(graphs)} graphs; raised {total('raised')}; "
                     f"fused {total('fused')}; lowered {total('lowered')}")
    parts.append(f"torch threads {ok[-1]['torch_threads']}, affinity {ok[-1]['affinity']}, "
                 f"priority {ok[-1]['priority']}")
    return "; ".join(parts)


def _report(results: dict[tuple[str, str], list[dict[str, Any]]], prefill_tokens: int) -> None:
    """The table (medians over starts, ratios to plain vLLM of the same model) and, per way,
    the kernels of a decode step and what our compiler did."""
    keys = list(dict.fromkeys(k for k, _ in results))
    ways = list(dict.fromkeys(w for _, w in results))
    print(f"\n| model | way | starts | start-up s | prefill ms ({prefill_tokens} tok) | "
          f"decode ms/tok | start-up x | prefill x | decode x | tokens = plain | fallback lines |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def med(key: str, way: str, field: str) -> float | None:
        vals = [r[field] for r in results.get((key, way), []) if "error" not in r]
        return statistics.median(vals) if vals else None

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}" if a is not None and b else "-"

    for key in keys:
        plain_tokens = next((r["tokens"] for r in results.get((key, "plain"), [])
                             if "error" not in r), None)
        for way in ways:
            runs = results.get((key, way), [])
            errors = [r["error"] for r in runs if "error" in r]
            if not runs or len(errors) == len(runs):
                print(f"| {key} | {way} | failed: {errors[0] if errors else 'not run'} |")
                continue
            s, p, d = (med(key, way, k) or 0.0 for k in ("startup", "prefill", "decode"))
            ps, pp, pd = (med(key, "plain", k) for k in ("startup", "prefill", "decode"))
            same = all(r["tokens"] == plain_tokens for r in runs if "error" not in r)
            fb = max(r["fallbacks"] for r in runs if "error" not in r)
            print(f"| {key} | {way} | {len(runs) - len(errors)} | {s:.1f} | {p * 1e3:.2f} | "
                  f"{d * 1e3:.3f} | {ratio(s, ps)} | {ratio(p, pp)} | {ratio(d, pd)} | {same} "
                  f"| {fb} |")
    print()
    for key in keys:
        for way in ways:
            if (key, way) in results:
                print(f"- {key} {way}: {_summary(results[(key, way)])}")
                print(f"  {_breakdown(results[(key, way)])}")


# torch.profiler names, by what they compute, for the step breakdown
PROFILE_GROUPS = {
    "int8/fp8 GEMMs": ("_C::onednn_scaled_mm", "_C::int8_scaled_mm_with_quant",
                       "aten::_scaled_mm"),
    # torch's CPU `_scaled_mm` (vLLM's fp8 GEMM here) upcasts the fp8 weight at every call:
    # its copies, scalings and bf16 GEMMs are its own children, not in its self time
    "aten copy_/mul (fp8: in _scaled_mm)": ("aten::copy_", "aten::mul"),
    "aten mm (fp8: in _scaled_mm; LM head)": ("aten::mm", "aten::addmm"),
    "attention": ("_C::cpu_attention_with_kv_cache", "_C::cpu_attn_reshape_and_cache"),
    "_C quants": ("_C::static_scaled_int8_quant", "_C::dynamic_scaled_int8_quant"),
    # the compiled graph's own time: its Inductor kernels (norms, act-and-mul, fused quants)
    "compiled-graph kernels": ("## Call CompiledFxGraph",),
}


def _breakdown(runs: list[dict[str, Any]]) -> str:
    """Median ms per step of PROFILE_GROUPS (self CPU time) in the profiled decode and
    prefill runs, the rest being Python, framework and small ops."""
    ok = [r for r in runs if "error" not in r and "profile_decode" in r]
    if not ok:
        return ""
    out = []
    for phase in ("decode", "prefill"):
        groups: dict[str, list[float]] = {}
        for r in ok:
            prof = r[f"profile_{phase}"]
            for name, prefixes in PROFILE_GROUPS.items():
                groups.setdefault(name, []).append(sum(
                    us for n, _, us in prof["top"] if n.startswith(prefixes)))
            groups.setdefault("step", []).append(prof["wall_us"])
        step = statistics.median(groups.pop("step"))
        parts = ", ".join(f"{n} {statistics.median(v) / 1e3:.2f}" for n, v in groups.items())
        out.append(f"{phase} step {step / 1e3:.2f} ms: {parts}")
    return "; ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = list(MODELS) + list(BENCH_MODELS)
    parser.add_argument("--models", default="llama", help="comma list of " + ",".join(names))
    parser.add_argument("--ways", default=",".join(WAYS),
                        help="comma list of " + ",".join(WAYS + EXTRA_WAYS))
    parser.add_argument("--priority", default="default",
                        help="comma list: each of our ways once per VLLM_XDSL_PRIORITY value "
                             "(default: unset)")
    parser.add_argument("--amx", default="on",
                        help="comma list of on,off: off hides AMX from vLLM (module doc)")
    parser.add_argument("--cpus", help="pin every engine to these CPUs (taskset -c)")
    parser.add_argument("--eager-rounding", action="store_true",
                        help="TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1 for every way")
    parser.add_argument("--kernel-cache", choices=("fresh", "warm"), default="fresh",
                        help="our built kernels: fresh per start (each builds what it uses), "
                             "or warm: built once before the first start (timed apart, the "
                             "cpu provider's: `python -m vllm_xdsl.backends.cuda.build cpu`) "
                             "and shared")
    parser.add_argument("--profile", action="store_true",
                        help="per start, torch.profiler's ops of one prefill and decode run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prefill-tokens", type=int, default=128)
    parser.add_argument("--decode-tokens", type=int, default=32)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--ckpt-dir", default=str(Path(tempfile.gettempdir()) / "vllm-bench-ckpt"))
    parser.add_argument("--log-dir", help="keep each engine start's output here")
    parser.add_argument("--json", help="write every start's result here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--way", help=argparse.SUPPRESS)
    parser.add_argument("--ckpt", help=argparse.SUPPRESS)
    parser.add_argument("--quantization", help=argparse.SUPPRESS)
    parser.add_argument("--report", metavar="JSON",
                        help="print the table of a run saved with --json (also a partial one)")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        _report({(k.split(" | ")[0], k.split(" | ")[1]): v
                 for k, v in saved["results"].items()}, saved["prefill_tokens"])
        return
    models = [m for m in args.models.split(",") if m]
    ways = [w for w in args.ways.split(",") if w]
    amxs = [a for a in args.amx.split(",") if a]
    priorities = [p for p in args.priority.split(",") if p]
    bad = ([m for m in models if m not in names]
           + [w for w in ways if w not in WAYS + EXTRA_WAYS]
           + [a for a in amxs if a not in ("on", "off")])
    if bad or args.rounds < 1 or args.decode_tokens < 2 or not priorities:
        sys.exit(f"error: bad arguments {bad or ''} (rounds >= 1, decode-tokens >= 2)")
    if "plain" not in ways:
        ways.insert(0, "plain")
    ways, notes = _available_ways(ways)
    ways = [w if w == "plain" or p == "default" else f"{w}@{p}"
            for w in ways for p in (priorities if w != "plain" else ["default"])]
    print(f"# load average at start: {os.getloadavg()}, cpus {args.cpus or 'all'}, "
          f"amx {amxs}, eager rounding {args.eager_rounding}, "
          f"kernel cache {args.kernel_cache}", flush=True)
    kernel_cache = _warm_kernel_cache(args.cpus) if args.kernel_cache == "warm" else None
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    configs = [(m, a) for m in models for a in amxs]
    for rnd in range(args.rounds):
        for model, amx in configs:
            if model in BENCH_MODELS:
                base, _, shapes = BENCH_MODELS[model]
                ckpt = write_checkpoint(base, Path(args.ckpt_dir) / model, shapes=shapes)
            else:
                ckpt = write_checkpoint(model, Path(args.ckpt_dir) / model)
            key = f"{model} amx={amx}"
            order = ways if rnd % 2 == 0 else ways[::-1]
            for way in order:
                r = _run_variant(model, way, ckpt, args, amx, kernel_cache)
                brief = {k: v for k, v in r.items() if not k.startswith(("profile", "graphs"))}
                print(f"# {key} round {rnd} {way}: {json.dumps(brief)}", flush=True)
                results.setdefault((key, way), []).append(r)
                if args.json:  # after every start: an interrupted run keeps what it measured
                    Path(args.json).write_text(json.dumps(
                        {"prefill_tokens": args.prefill_tokens,
                         "results": {f"{k} | {w}": v for (k, w), v in results.items()}},
                        indent=1))
    print(f"# load average at end: {os.getloadavg()}", flush=True)
    _report(results, args.prefill_tokens)
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
