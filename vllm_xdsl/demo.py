"""`python -m vllm_xdsl.demo`: a small Llama-style decoder compiled end to end on the CPU.

The bundled decoder (vllm_xdsl/models, random weights, HF-style RMSNorm, fp8
static-quantized linear inputs emulated as quant -> dequant -> matmul) is compiled with
`torch.compile(backend="vllm_xdsl")`. The demo prints the op counts after import and
after each pass, the dispatch decisions, the max error against eager, and the time per
call against eager and plain Inductor. Flags make the model bigger (--layers, --hidden).

Compile times are compared in fresh processes: in one process, whichever compiles first
pays the cold start (imports, first-use initialisation, empty caches) for both, and the
ratio mostly measures the order (about 5x either way on this decoder). So each variant
compiles in a process of its own (this module with the hidden `--time-one VARIANT`), with
empty TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR and VLLM_XDSL_CACHE_DIR, one after the
other; `--no-compile-times` skips them.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from vllm_xdsl import compile as backend
from vllm_xdsl.models import DecoderConfig, TinyDecoder
from vllm_xdsl.pipeline import PipelineResult

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
VARIANTS = ("vllm_xdsl", "inductor")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m vllm_xdsl.demo", description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--intermediate", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--tokens", type=int, nargs="+", default=[7, 33, 128],
                   help="token counts to run (one compile serves all)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--inner", choices=["inductor", "eager"], default="inductor")
    p.add_argument("--target", choices=["cpu", "cuda", "rocm"], default=None)
    p.add_argument("--priority", default=None, help='e.g. "rms_norm=triton,native"')
    p.add_argument("--no-fp8", action="store_true", help="plain linears")
    p.add_argument("--no-baseline", action="store_true", help="skip plain Inductor")
    p.add_argument("--no-compile-times", action="store_true",
                   help="skip comparing compile times (two more cold compiles, in fresh processes)")
    p.add_argument("--repeat", type=int, default=10, help="timed calls per token count")
    # Internal: compile and first-call one variant, print its time as JSON (fresh_compile).
    p.add_argument("--time-one", choices=VARIANTS, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _semantic(counts: Counter[str]) -> str:
    parts = [f"{name} x{n}" for name, n in sorted(counts.items()) if not name.startswith("torch.")]
    return ", ".join(parts) or "-"


def print_stages(result: PipelineResult) -> None:
    print(f"{'stage':<18}{'ops':>6}{'torch.call':>12}  semantic / provider ops")
    for stage in result.stages:
        c = stage.op_counts
        print(f"{stage.name:<18}{sum(c.values()):>6}{c['torch.call']:>12}  {_semantic(c)}")


def time_per_call(fn: Callable[[], object], repeat: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def build(args: argparse.Namespace) -> tuple[DecoderConfig, torch.nn.Module, dict[str, Any]]:
    """The demo decoder (seeded: the same weights in every process) and the backend options."""
    cfg = DecoderConfig(hidden=args.hidden, intermediate=args.intermediate, heads=args.heads,
                        layers=args.layers, fp8=not args.no_fp8)
    torch.manual_seed(0)
    model = TinyDecoder(cfg).to(DTYPES[args.dtype]).eval()
    options = {"inner": args.inner}
    options.update({k: v for k, v in (("target", args.target), ("priority", args.priority)) if v})
    return cfg, model, options


def time_one(args: argparse.Namespace) -> dict[str, object]:
    """Compile one variant and call it once per token count: the seconds that takes. Run in
    a fresh process (fresh_compile); torch, Dynamo and this module are imported before."""
    import torch._dynamo  # noqa: F401  (torch.compile imports it for either backend)

    cfg, model, options = build(args)
    inputs = [torch.randint(0, cfg.vocab, (t,)) for t in args.tokens]
    if args.time_one == "vllm_xdsl":
        compiled = torch.compile(model, backend="vllm_xdsl", dynamic=True, options=options)
    else:
        compiled = torch.compile(model, dynamic=True)
    with torch.no_grad():
        start = time.perf_counter()
        for ids in inputs:
            compiled(ids)
        seconds = time.perf_counter() - start
    return {"variant": args.time_one, "seconds": seconds}


def fresh_compile(argv: list[str], variant: str) -> float:
    """`variant`'s compile time, measured in a fresh process with empty caches."""
    with tempfile.TemporaryDirectory(prefix="vllm_xdsl_demo_") as tmp:
        env = dict(os.environ)
        for var, sub in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton"),
                         ("VLLM_XDSL_CACHE_DIR", "vllm_xdsl")):
            env[var] = os.path.join(tmp, sub)
        p = subprocess.run([sys.executable, "-m", "vllm_xdsl.demo", *argv, "--time-one", variant],
                           capture_output=True, text=True, env=env)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the {variant} compile process exited {p.returncode}: {last}")
    return float(json.loads(lines[-1])["seconds"])


def print_compile_times(argv: list[str], args: argparse.Namespace) -> None:
    ours, inductor = (fresh_compile(argv, v) for v in VARIANTS)
    print(f"\ncompile time (torch.compile + the first call for each of {len(args.tokens)} token "
          "counts),\neach variant in a fresh process with empty caches:")
    for label, value in ((f"vllm_xdsl (inner={args.inner})", f"{ours:.1f} s"),
                         ("plain Inductor", f"{inductor:.1f} s"),
                         ("ratio vllm_xdsl / Inductor", f"{ours / inductor:.2f}x")):
        print(f"  {label:<28}{value:>9}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.time_one is not None:
        print(json.dumps(time_one(args)))
        return 0
    cfg, model, options = build(args)
    print(f"vllm-xdsl demo: {cfg}, {args.dtype}, inner={args.inner}, tokens={args.tokens}")

    torch._dynamo.reset()
    before = backend.RESULTS.count
    compiled = torch.compile(model, backend="vllm_xdsl", dynamic=True, options=options)
    baseline = None if args.no_baseline else torch.compile(model, dynamic=True)
    compare = baseline is not None and not args.no_compile_times
    inputs = [torch.randint(0, cfg.vocab, (t,)) for t in args.tokens]
    with torch.no_grad():
        start = time.perf_counter()
        outs = [compiled(ids) for ids in inputs]
        compile_s = time.perf_counter() - start
        results = backend.RESULTS.since(before)
        # Not a comparison: this process's first compile, with torch's caches as found.
        print(f"\ncompiled {len(results)} graph(s) in {compile_s:.1f} s "
              f"for {len(args.tokens)} token counts (this process, caches as found"
              + ("; compared in fresh processes below)" if compare else ")"))
        for result in results:
            print()
            print_stages(result)
            print("\ndispatch decisions:")
            print("  " + (result.report or "(lower-dispatch did not run)").replace("\n", "\n  "))
        print("\nmax |vllm_xdsl - eager| per token count:")
        for ids, out in zip(inputs, outs, strict=True):
            ref = model(ids)
            err = (out.float() - ref.float()).abs().max().item()
            print(f"  T={ids.shape[0]:<5} {err:.3e}   (|eager| max {ref.float().abs().max():.2f})")
        if baseline is not None:
            base_outs = [baseline(ids) for ids in inputs]
            print("\nplain Inductor's max |inductor - eager|: " + ", ".join(
                      f"{(b.float() - model(ids).float()).abs().max().item():.3e}"
                      for ids, b in zip(inputs, base_outs, strict=True)))
            print("(fp8 inputs: a 1-ulp change before a quant moves a value by one fp8 step, "
                  "so compiled and eager differ by that much even without any pass)")
        print(f"\ntime per call (ms){'':<3}{'eager':>9}{'vllm_xdsl':>11}"
              f"{'' if baseline is None else 'inductor':>10}")
        for ids in inputs:
            row = [time_per_call(functools.partial(model, ids), args.repeat),
                   time_per_call(functools.partial(compiled, ids), args.repeat)]
            if baseline is not None:
                row.append(time_per_call(functools.partial(baseline, ids), args.repeat))
            print(f"  T={ids.shape[0]:<16}" + "".join(f"{v * 1e3:>10.3f}" for v in row))
    if compare:
        try:
            print_compile_times(argv, args)
        except RuntimeError as e:
            print(f"vllm_xdsl.demo: error: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
