"""Latency and peak memory of the demo decoder: vllm_xdsl backend vs Inductor vs eager (issue 8).

    python bench/model_latency.py [--layers 8] [--tokens 1,512] [--rounds 15] [--no-rss]
    python bench/model_latency.py --device cuda --hidden 4096 --intermediate 14336 \
        --heads 32 --layers 2 --tokens 1,4096 --no-rss          # on a GPU

The bundled decoder (vllm_xdsl/models: HF-style RMSNorm, fp8 static-quant linears, SDPA;
random weights, bf16, the demo's sizes unless --hidden etc.) on the CPU (or --device cuda)
three ways:

- vllm_xdsl: `torch.compile(backend="vllm_xdsl", options={"inner": "inductor",
  "strict": True})` (strict: a pipeline failure raises instead of silently falling back);
- inductor: plain `torch.compile` (Inductor);
- eager.

Both compiled variants use `dynamic=True` (one graph for all token counts, as vLLM does).

Latency: the three are timed side by side in one process, interleaved (each round times a
batch of calls of every variant, in rotating order); the minimum per call over the rounds
is kept, so load spikes on this shared machine hit all variants alike.

On a GPU each timed batch ends with a device synchronisation, and peak memory per call is
the caching allocator's peak (torch.cuda.max_memory_allocated) above its level before the
call.

Peak memory on the CPU, two measures (tracemalloc does not see torch's C++ allocations):
- per call: the peak of live tensor bytes during one forward, from the torch profiler's
  allocator records (`profile_memory=True`: every CPU allocation and free through c10's
  allocator, which eager ops and Inductor's generated code both use; each event's own
  bytes, summed in time order), relative to the start of the call: activations,
  temporaries and the output;
- per process: the peak RSS (VmHWM in /proc/self/status) of a fresh subprocess per
  variant that builds the model, compiles it and runs every token count, minus its RSS
  before compiling: what compiling and running costs the process (the C++ compiler runs
  in worker processes and is not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

import torch

from vllm_xdsl.models import DecoderConfig, TinyDecoder

VARIANTS = ("vllm_xdsl", "inductor", "eager")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--intermediate", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--tokens", default="1,512", help="comma-separated token counts")
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds (min is kept)")
    p.add_argument("--batch-ms", type=float, default=20.0, help="time per timed batch")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1: an OpenMP barrier on a loaded 2-core machine makes "
                        "timings swing 5x; every variant uses the same count)")
    p.add_argument("--no-rss", action="store_true", help="skip the per-process RSS subprocesses")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        args.tokens = [int(t) for t in args.tokens.split(",")]
    except ValueError:
        p.error(f"--tokens: expected comma-separated integers, got {args.tokens!r}")
    return args


def build(args: argparse.Namespace) -> torch.nn.Module:
    torch.set_num_threads(args.threads)  # before compiling: Inductor bakes it into kernels
    cfg = DecoderConfig(hidden=args.hidden, intermediate=args.intermediate, heads=args.heads,
                        layers=args.layers)
    torch.manual_seed(0)
    return TinyDecoder(cfg).to(torch.bfloat16).to(args.device).eval()


def variant(name: str, model: torch.nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    if name == "eager":
        return model
    if name == "inductor":
        return torch.compile(model, dynamic=True)
    return torch.compile(model, backend="vllm_xdsl", dynamic=True,
                         options={"inner": "inductor", "strict": True})


def synchronize() -> None:
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def per_call(fn: Callable[[], object], n: int) -> float:
    synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    synchronize()
    return (time.perf_counter() - t0) / n


def peak_tensor_bytes(fn: Callable[[], object], device: str) -> int:
    """Peak of live bytes allocated through torch's allocator during fn(), above the start."""
    if device == "cuda":
        synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        fn()
        synchronize()
        return torch.cuda.max_memory_allocated() - start
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    # Each event's own allocations (+) and frees (-, often as "[memory]" events), in time
    # order; the running sum is the live bytes allocated since the start.
    events = sorted((e for e in prof.events() if e.self_cpu_memory_usage),
                    key=lambda e: e.time_range.start)
    live = peak = 0
    for e in events:
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    return peak


def rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(args: argparse.Namespace) -> None:
    """One variant in this fresh process: JSON with the RSS growth from compile + run."""
    model = build(args)
    inputs = [torch.randint(0, 256, (t,), device=args.device) for t in args.tokens]
    before = rss_kb("VmRSS")
    fn = variant(args.child, model)
    t0 = time.perf_counter()
    with torch.no_grad():
        for ids in inputs:
            for _ in range(3):
                fn(ids)
    print(json.dumps({"rss_growth_mb": (rss_kb("VmHWM") - before) / 1024,
                      "first_calls_s": time.perf_counter() - t0}))


def rss_children(args: argparse.Namespace, argv: list[str]) -> dict[str, dict[str, float]]:
    out = {}
    for name in VARIANTS:
        proc = subprocess.run([sys.executable, __file__, *argv, "--child", name],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            raise SystemExit(f"model_latency: the {name} subprocess failed: {tail}")
        out[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.child:
        return child(args)
    model = build(args)
    where = (torch.cuda.get_device_name() if args.device == "cuda"
             else f"CPU, {torch.get_num_threads()} threads")
    print(f"model: demo decoder, {args.layers} layers, hidden {args.hidden}, intermediate "
          f"{args.intermediate}, {args.heads} heads, bf16, fp8 static-quant linears; {where}, "
          f"torch {torch.__version__}")
    one, five, _ = os.getloadavg()
    print(f"load average at start: {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores")
    fns = {name: variant(name, model) for name in VARIANTS}
    inputs = {t: torch.randint(0, 256, (t,), device=args.device) for t in args.tokens}
    rows = {}
    with torch.no_grad():
        compile_s = {}
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for ids in inputs.values():
                fn(ids)
            compile_s[name] = time.perf_counter() - t0
        for t, ids in inputs.items():
            ref = fns["eager"](ids).float()
            err = {n: (fns[n](ids).float() - ref).abs().max().item() for n in VARIANTS[:2]}
            n_calls = {n: max(1, int(args.batch_ms / 1e3 / per_call(lambda f=f, ids=ids: f(ids), 3)))
                       for n, f in fns.items()}
            best = dict.fromkeys(VARIANTS, float("inf"))
            for r in range(args.rounds):
                order = VARIANTS[r % 3:] + VARIANTS[:r % 3]
                for n in order:
                    best[n] = min(best[n], per_call(lambda n=n, ids=ids: fns[n](ids), n_calls[n]))
            peak = {n: peak_tensor_bytes(lambda n=n, ids=ids: fns[n](ids), args.device)
                    for n in VARIANTS}
            rows[t] = {"ms": {n: v * 1e3 for n, v in best.items()}, "peak_kib": {
                n: v / 2**10 for n, v in peak.items()}, "max_err_vs_eager": err}
    one, _, _ = os.getloadavg()
    print("first calls (compile + run, all token counts): "
          + ", ".join(f"{n} {s:.1f} s" for n, s in compile_s.items()))
    print(f"\nlatency, ms per call (min over {args.rounds} interleaved rounds); peak live "
          f"tensor KiB per call")
    print(f"{'tokens':>6}  {'vllm_xdsl':>10} {'inductor':>10} {'eager':>10}   "
          f"{'ours/ind':>8} {'eager/ind':>9}   {'peak ours':>9} {'peak ind':>9} {'peak eager':>10}")
    for t, r in rows.items():
        ms, pk = r["ms"], r["peak_kib"]
        print(f"{t:>6}  {ms['vllm_xdsl']:10.3f} {ms['inductor']:10.3f} {ms['eager']:10.3f}   "
              f"{ms['vllm_xdsl'] / ms['inductor']:8.3f} {ms['eager'] / ms['inductor']:9.3f}   "
              f"{pk['vllm_xdsl']:9.1f} {pk['inductor']:9.1f} {pk['eager']:10.1f}")
    for t, r in rows.items():
        print(f"max |x - eager| at {t} tokens: " + ", ".join(
            f"{n} {e:.3e}" for n, e in r["max_err_vs_eager"].items()))
    print(f"load average at end: {one:.1f}")
    if not args.no_rss:
        rss = rss_children(args, [a for a in argv if a != "--no-rss"])
        print("\nper process (fresh subprocess each): RSS growth from compile + run: "
              + ", ".join(f"{n} {v['rss_growth_mb']:.0f} MB" for n, v in rss.items()))
    print("\ntargets (vllm_xdsl vs plain Inductor):")
    for t, r in rows.items():
        ratio = r["ms"]["vllm_xdsl"] / r["ms"]["inductor"]
        mem = r["peak_kib"]["vllm_xdsl"] - r["peak_kib"]["inductor"]
        print(f"  {t:>4} tokens: latency ratio {ratio:.3f} "
              f"({'met' if ratio <= 1.05 else 'NOT met'}: <= 1 within 5 % timing noise), "
              f"peak tensor memory {mem:+.1f} KiB ({'met' if mem <= 0 else 'NOT met'})")


if __name__ == "__main__":
    main()
