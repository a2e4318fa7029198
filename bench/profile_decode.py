"""Where a decode step's time goes: torch.profiler over the compiled demo decoder, ours vs
Inductor, one token.

    python bench/profile_decode.py [--device cuda] [--layers 2] [--hidden 4096] [--steps 20]

On an H200 a 1-token step of two Llama-8B-sized layers took 1.97 ms with the vllm_xdsl
backend against 0.52 ms with Inductor (bench/RESULTS.md): host-bound. This prints, for each
variant, the wall time per step and the profiler's top operators by self CPU time (the
host work per step: our provider ops, Inductor's launches, the dispatcher) and, on a GPU,
by device time. Run it where the gap shows (a GPU); on the CPU it profiles the CPU run.
"""

from __future__ import annotations

import argparse
import time

import torch

from vllm_xdsl.models import DecoderConfig, TinyDecoder


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"),
                   default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--intermediate", type=int, default=14336)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--steps", type=int, default=20, help="profiled steps per variant")
    p.add_argument("--rows", type=int, default=12, help="operators listed per table")
    args = p.parse_args()

    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    cfg = DecoderConfig(hidden=args.hidden, intermediate=args.intermediate, heads=args.heads,
                        layers=args.layers)
    model = TinyDecoder(cfg).to(torch.bfloat16).to(args.device).eval()
    variants = {
        "vllm_xdsl": torch.compile(model, backend="vllm_xdsl", dynamic=True,
                                   options={"inner": "inductor", "strict": True}),
        "inductor": torch.compile(model, dynamic=True),
    }
    ids = torch.randint(0, 256, (1,), device=args.device)
    gpu = args.device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    print(f"demo decoder, {args.layers} layers, hidden {args.hidden}, 1 token, {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if gpu else "") + f", torch {torch.__version__}")
    with torch.inference_mode():
        for name, fn in variants.items():
            for _ in range(3):  # compile and warm up
                fn(ids)
            if gpu:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                fn(ids)
            if gpu:
                torch.cuda.synchronize()
            per_step = (time.perf_counter() - t0) / args.steps
            with profile(activities=activities) as prof:
                for _ in range(args.steps):
                    fn(ids)
                if gpu:
                    torch.cuda.synchronize()
            print(f"\n=== {name}: {per_step * 1e3:.3f} ms per step (unprofiled)")
            table = prof.key_averages()
            print(table.table(sort_by="self_cpu_time_total", row_limit=args.rows))
            if gpu:
                print(table.table(sort_by="self_device_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
