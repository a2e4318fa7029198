"""Eager dispatch overhead: `vllm_xdsl.ops.<op>(...)` vs a direct call of the impl it selects.

CPU, hidden 4096, bf16, tokens 1..64. Both are timed side by side (interleaved batches,
minimum over many), so machine noise hits both alike. Target: <= 1.10 for
rms_norm at 1 token.

    python bench/dispatch_overhead.py [--ops rms_norm,silu_and_mul] [--rounds 30]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

from vllm_xdsl import ops

HIDDEN = 4096
TOKENS = (1, 2, 4, 8, 16, 32, 64)


def make_args(op: str, tokens: int) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(torch.bfloat16)

    if op == "rms_norm":
        return (r(tokens, HIDDEN), r(HIDDEN), 1e-6)
    if op == "fused_add_rms_norm":
        return (r(tokens, HIDDEN), r(tokens, HIDDEN), r(HIDDEN), 1e-6)
    if op == "silu_and_mul":
        return (r(tokens, 2 * HIDDEN),)
    if op == "dynamic_per_token_scaled_fp8_quant":
        return (r(tokens, HIDDEN),)
    if op == "rms_norm_quant":
        return (r(tokens, HIDDEN), r(HIDDEN), 1e-6, torch.tensor([0.02]), None,
                torch.float8_e4m3fn, True, "tensor")
    raise SystemExit(f"dispatch_overhead: no arguments defined for op {op!r}")


def batch_time(fn: Callable[..., Any], args: tuple[Any, ...], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter() - t0) / n


def measure(op_name: str, tokens: int, rounds: int, n: int) -> tuple[float, float, str]:
    op = ops.ALL_OPS[op_name]
    args = make_args(op_name, tokens)
    direct = op.explain(*args).impl.fn
    op(*args)  # decide once (cached), as in steady state
    best = {"eager": float("inf"), "direct": float("inf")}
    for _ in range(rounds):
        for name, fn in (("eager", op), ("direct", direct)):
            best[name] = min(best[name], batch_time(fn, args, n))
    return best["eager"], best["direct"], op.explain(*args).provider


def pure_overhead(rounds: int, n: int, checked: bool) -> tuple[float, float]:
    """Dispatch to a no-op impl vs calling that no-op: the dispatch cost alone (seconds).

    `checked`: the impl has an argument check, so the decision depends on the arguments and
    is cached under the full key (dtypes, shapes); otherwise it is cached per device."""

    def noop(x, weight, epsilon, variance_size=None):  # same signature as the native
        return x

    ops.rms_norm.register_impl("bench_noop", supports_args=(lambda **_: True) if checked else None)(noop)
    try:
        args = make_args("rms_norm", 1)
        with ops.priority("rms_norm=bench_noop"):
            ops.rms_norm(*args)
            best = {"eager": float("inf"), "direct": float("inf")}
            for _ in range(rounds):
                for name, fn in (("eager", ops.rms_norm), ("direct", noop)):
                    best[name] = min(best[name], batch_time(fn, args, n * 50))
    finally:
        ops.rms_norm.unregister_impl("bench_noop")
    return best["eager"], best["direct"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default="rms_norm,fused_add_rms_norm,silu_and_mul")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--calls", type=int, default=20, help="calls per timed batch")
    a = p.parse_args()
    torch.set_num_threads(1)  # steadier timings; the ratio is what matters
    for checked, what in ((False, "no-op impl"), (True, "no-op impl with supports_args")):
        eager, direct = pure_overhead(a.rounds, a.calls, checked)
        print(f"dispatch alone (rms_norm, {what}): {(eager - direct) * 1e9:.0f} ns per call "
              f"({eager * 1e9:.0f} ns dispatched vs {direct * 1e9:.0f} ns direct)")
    print(f"{'op':<22} {'tokens':>6} {'impl':<8} {'eager us':>9} {'direct us':>9} {'ratio':>6}")
    for op_name in a.ops.split(","):
        for t in TOKENS:
            eager, direct, provider = measure(op_name, t, a.rounds, a.calls)
            print(f"{op_name:<22} {t:>6} {provider:<8} {eager * 1e6:>9.2f} {direct * 1e6:>9.2f} "
                  f"{eager / direct:>6.3f}")


if __name__ == "__main__":
    main()
