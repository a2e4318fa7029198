"""Host cost of one provider-op call, side by side: how the kernels reach torch matters at
decode, where a kernel runs for a few microseconds.

    python bench/op_call_overhead.py [--calls 20000]

On an H200 (bench/RESULTS.md) a 2-layer decoder step with 9 provider-op calls took 1.97 ms
against Inductor's 0.52 ms: the host, not the GPU, set the pace. This measures the host
side on any machine, with the Triton kernel launch itself stubbed out (no kernel runs, so
no GPU is needed and only the Python and dispatcher work is timed), for one
`rms_norm_quant` call (1 token, hidden 4096, bf16, static fp8):

- launcher: the Python launcher (vllm_xdsl.backends.triton.functions) called directly;
- define_op: the op as compiled graphs call it, `torch.ops.vllm_xdsl_triton.<op>.default`
  (defined with vllm_xdsl.ops.torch_library.define_op: dispatcher -> launcher);
- custom_op: the same launcher wrapped by `torch.library.custom_op` (what the provider ops
  used before), defined here for the comparison;

each under `torch.no_grad()` and `torch.inference_mode()`. Variants are interleaved over
rounds; the minimum per call is kept.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

os.environ.setdefault("TRITON_INTERPRET", "1")  # CPU tensors; no kernel runs anyway

import torch  # noqa: E402


def per_call(fn: Callable[[], object], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20000, help="calls per timed batch")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()

    from vllm_xdsl import ops
    from vllm_xdsl.backends.triton import launch
    from vllm_xdsl.backends.triton.functions import FUNCTIONS
    from vllm_xdsl.backends.triton.torch_ops import torch_op

    launch._launch = lambda *a, **k: None  # time the host path only
    name = "rms_norm_quant"
    launcher = FUNCTIONS[name]
    custom = torch.library.custom_op(
        f"vllm_xdsl_bench::{name}",
        launcher,
        mutates_args=(),
        schema=torch.library.infer_schema(ops.ALL_OPS[name].native, mutates_args=()),
    )
    custom.register_fake(ops.ALL_OPS[name].native)
    x = torch.randn(1, 4096).to(torch.bfloat16)
    w = torch.randn(4096).to(torch.bfloat16)
    call_args = (x, w, 1e-6, torch.tensor([0.02]), None, torch.float8_e4m3fn, True, "tensor")
    variants = {
        "launcher": launcher,
        "define_op": torch_op(name),
        "custom_op": torch.ops.vllm_xdsl_bench.rms_norm_quant.default,
    }
    print(f"host cost of one {name} call (kernel launch stubbed), torch {torch.__version__}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"{'mode':<16} " + " ".join(f"{v:>11}" for v in variants) + "   custom_op/define_op")
    for mode, ctx in (("no_grad", torch.no_grad), ("inference_mode", torch.inference_mode)):
        best = dict.fromkeys(variants, float("inf"))
        with ctx():
            for fn in variants.values():
                per_call(lambda fn=fn: fn(*call_args), 200)  # warm-up
            for r in range(args.rounds):
                names = list(variants)[r % 3 :] + list(variants)[: r % 3]
                for v in names:
                    t = per_call(lambda v=v: variants[v](*call_args), args.calls)
                    best[v] = min(best[v], t)
        cells = " ".join(f"{best[v] * 1e6:8.1f} us" for v in variants)
        print(f"{mode:<16} {cells}   {best['custom_op'] / best['define_op']:.2f}")


if __name__ == "__main__":
    main()
