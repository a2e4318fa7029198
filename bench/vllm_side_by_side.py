"""Plain vLLM against vLLM with our compiler, side by side in one run (CPU build).

Each variant starts its engine in its own child process with empty compile caches
(VLLM_CACHE_ROOT, TORCHINDUCTOR_CACHE_DIR, VLLM_XDSL_CACHE_DIR in fresh temporary dirs),
variants interleaved over the rounds so machine load hits them alike. Measured per start:
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
import json
import os
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


def child(args: argparse.Namespace) -> None:
    """One engine start and its measurements; prints one JSON line."""
    from vllm import LLM

    kwargs: dict[str, Any] = {
        "model": args.ckpt,
        "skip_tokenizer_init": True,
        "gpu_memory_utilization": 0.1,
        "max_model_len": 512,
    }
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
    print("RESULT " + json.dumps(
        {"startup": startup, "prefill": prefill, "decode": decode, "tokens": tokens}
    ), flush=True)


def _run_variant(model: str, way: str, ckpt: Path, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"vllm-bench-{way}-") as tmp:
        env = dict(os.environ)
        env.update(
            VLLM_ENABLE_V1_MULTIPROCESSING="0",
            VLLM_CACHE_ROOT=f"{tmp}/vllm",
            TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor",
            VLLM_XDSL_CACHE_DIR=f"{tmp}/xdsl",
        )
        env.update(_WAY_ENV.get(way, {}))
        cmd = [sys.executable, __file__, "--child", "--way", way, "--ckpt", str(ckpt),
               "--prefill-tokens", str(args.prefill_tokens),
               "--decode-tokens", str(args.decode_tokens), "--reps", str(args.reps)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    log = proc.stdout + proc.stderr
    if args.log_dir:
        Path(args.log_dir).mkdir(parents=True, exist_ok=True)
        (Path(args.log_dir) / f"{model}-{way}-{int(time.time())}.log").write_text(log)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama", help="comma list of " + ",".join(MODELS))
    parser.add_argument("--ways", default=",".join(WAYS),
                        help="comma list of " + ",".join(WAYS + EXTRA_WAYS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prefill-tokens", type=int, default=128)
    parser.add_argument("--decode-tokens", type=int, default=32)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--ckpt-dir", default=str(Path(tempfile.gettempdir()) / "vllm-bench-ckpt"))
    parser.add_argument("--log-dir", help="keep each engine start's output here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--way", help=argparse.SUPPRESS)
    parser.add_argument("--ckpt", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    models = [m for m in args.models.split(",") if m]
    ways = [w for w in args.ways.split(",") if w]
    bad = [m for m in models if m not in MODELS] + [w for w in ways if w not in WAYS + EXTRA_WAYS]
    if bad or args.rounds < 1 or args.decode_tokens < 2:
        sys.exit(f"error: bad arguments {bad or ''} (rounds >= 1, decode-tokens >= 2)")
    if "plain" not in ways:
        ways.insert(0, "plain")
    ways, notes = _available_ways(ways)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for model in models:
        ckpt = write_checkpoint(model, Path(args.ckpt_dir) / model)
        for rnd in range(args.rounds):
            order = ways if rnd % 2 == 0 else ways[::-1]
            for way in order:
                r = _run_variant(model, way, ckpt, args)
                print(f"# {model} round {rnd} {way}: {json.dumps(r)}", flush=True)
                results.setdefault((model, way), []).append(r)
    print(f"\n| model | way | start-up s | prefill ms ({args.prefill_tokens} tok) | "
          f"decode ms/tok | start-up x | prefill x | decode x | tokens = plain | fallback lines |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    def med(model: str, way: str, key: str) -> float | None:
        vals = [r[key] for r in results[(model, way)] if "error" not in r]
        return statistics.median(vals) if vals else None

    for model in models:

        plain_tokens = next((r["tokens"] for r in results[(model, "plain")] if "error" not in r), None)
        for way in ways:
            runs = results[(model, way)]
            errors = [r["error"] for r in runs if "error" in r]
            if len(errors) == len(runs):
                print(f"| {model} | {way} | failed: {errors[0]} |")
                continue
            s, p, d = (med(model, way, k) for k in ("startup", "prefill", "decode"))
            ps, pp, pd = (med(model, "plain", k) for k in ("startup", "prefill", "decode"))

            def ratio(a: float | None, b: float | None) -> str:
                return f"{a / b:.2f}" if a is not None and b else "-"

            same = all(r["tokens"] == plain_tokens for r in runs if "error" not in r)
            fb = max(r["fallbacks"] for r in runs if "error" not in r)
            print(f"| {model} | {way} | {s:.1f} | {p * 1e3:.2f} | {d * 1e3:.3f} | "
                  f"{ratio(s, ps)} | {ratio(p, pp)} | {ratio(d, pd)} | {same} | {fb} |")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
