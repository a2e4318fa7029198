"""Why a fused and an unfused RMSNorm + dynamic per-token int8 quant disagree once compiled,
though they are one function: measured side by side, share of int8 values that differ
from the eager composition (bf16 rows, weights in [0.5, 1.5)).

- eager: the fused op's native against the composition of the unfused natives;
- Inductor (CPU): the composition compiled, with torch's default
  `emulate_precision_casts=False` and with it on. Inductor's C++ codegen elides the
  bf16 round trip of the norm's output inside one fused kernel (pytorch#115260; its
  `to_dtype` caches the f32 value): the quant reads the unrounded f32 norm, another
  function than the contract (`rms_norm` returns x's dtype). Where the norm's output is a
  kernel's output (stored in bf16: vLLM's `_C` quant reads it from memory), it is rounded.
- vLLM's `_C.dynamic_scaled_int8_quant` (when vLLM is importable) of the eager norm: its
  CPU kernel multiplies by the f32 reciprocal of the scale (`recip`), where the contract
  divides: it differs only on quotients whose f32 product and quotient round apart.

    python bench/int8_norm_quant_rounding.py [--rows 64] [--hidden 2048]
"""

from __future__ import annotations

import argparse
import importlib

import torch

from vllm_xdsl import ops

BF16 = torch.bfloat16


def unfused(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return ops.dynamic_per_token_scaled_int8_quant.native(ops.rms_norm.native(x, w, 1e-6))


def fused(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    q, s = ops.rms_norm_quant.native(x, w, 1e-6, None, None, quant_dtype=torch.int8,
                                     static=False, granularity="token")
    return q, s


def share(a: torch.Tensor, b: torch.Tensor) -> str:
    return f"{float((a != b).float().mean()) * 100:.2f} %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=2048)
    args = parser.parse_args()
    if args.rows < 1 or args.hidden < 1:
        parser.error("--rows and --hidden must be positive")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.rows, args.hidden, generator=g).to(BF16)
    w = (torch.rand(args.hidden, generator=g) + 0.5).to(BF16)
    ref, _ = unfused(x, w)
    print(f"rows {args.rows}, hidden {args.hidden}: int8 values that differ from eager unfused")
    print(f"  eager fused op (its native)                  {share(fused(x, w)[0], ref)}")
    for emulate in (False, True):
        for name, fn in (("unfused", unfused), ("fused", fused)):
            torch._dynamo.reset()
            with torch._inductor.config.patch(emulate_precision_casts=emulate):
                got, _ = torch.compile(fn)(x, w)
            print(f"  Inductor {name:7} emulate_precision_casts={emulate!s:5} {share(got, ref)}")
    try:
        importlib.import_module("vllm.platforms").current_platform.import_kernels()
    except Exception as e:  # vLLM is optional here
        print(f"  vLLM's _C kernel: not measured ({type(e).__name__})")
        return
    y = ops.rms_norm.native(x, w, 1e-6)
    q = torch.empty_like(y, dtype=torch.int8)
    s = torch.empty(y.shape[0], 1)
    torch.ops._C.dynamic_scaled_int8_quant(q, y, s, None)
    print(f"  vLLM _C.dynamic_scaled_int8_quant (eager norm) {share(q, ref)}")
    recip = torch.round(y.float() * (1.0 / s)).clamp(-128, 127).to(torch.int8)
    print(f"    ... against the `recip` variant              {share(q, recip)}")


if __name__ == "__main__":
    main()
