"""`python -m vllm_xdsl.demo`: a small Llama-style decoder compiled end to end on the CPU.

The bundled decoder (vllm_xdsl/models, random weights, HF-style RMSNorm, fp8
static-quantized linear inputs emulated as quant -> dequant -> matmul) is compiled with
`torch.compile(backend="vllm_xdsl")`. The demo prints the op counts after import and
after each pass, the dispatch decisions, the max error against eager, and the time per
call against eager and plain Inductor. Flags make the model bigger (--layers, --hidden).
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import Counter
from collections.abc import Callable

import torch

from vllm_xdsl import compile as backend
from vllm_xdsl.models import DecoderConfig, TinyDecoder
from vllm_xdsl.pipeline import PipelineResult

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


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
    p.add_argument("--repeat", type=int, default=10, help="timed calls per token count")
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    dtype = DTYPES[args.dtype]
    cfg = DecoderConfig(hidden=args.hidden, intermediate=args.intermediate, heads=args.heads,
                        layers=args.layers, fp8=not args.no_fp8)
    torch.manual_seed(0)
    model = TinyDecoder(cfg).to(dtype).eval()
    options = {"inner": args.inner}
    options.update({k: v for k, v in (("target", args.target), ("priority", args.priority)) if v})
    print(f"vllm-xdsl demo: {cfg}, {args.dtype}, inner={args.inner}, tokens={args.tokens}")

    torch._dynamo.reset()
    before = backend.RESULTS.count
    compiled = torch.compile(model, backend="vllm_xdsl", dynamic=True, options=options)
    baseline = None if args.no_baseline else torch.compile(model, dynamic=True)
    inputs = [torch.randint(0, cfg.vocab, (t,)) for t in args.tokens]
    with torch.no_grad():
        start = time.perf_counter()
        outs = [compiled(ids) for ids in inputs]
        compile_s = time.perf_counter() - start
        results = backend.RESULTS.since(before)
        print(f"\ncompiled {len(results)} graph(s) in {compile_s:.1f} s "
              f"for {len(args.tokens)} token counts")
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
            start = time.perf_counter()
            base_outs = [baseline(ids) for ids in inputs]
            print(f"\nplain Inductor compiled in {time.perf_counter() - start:.1f} s; "
                  "its max |inductor - eager|: " + ", ".join(
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
