"""Instructions per element of the generated Triton kernels, compiled for sm_90 on any
machine (no GPU): the f32-emulated roundings against the GPU's conversions (`hw_casts`).

    python bench/kernel_instructions.py [--hidden 4096]

A static count of the instructions a thread executes (the kernels have no loops), divided
by the elements it handles, and by the bytes each element moves: PTX, and the SASS that
ptxas makes of it (what the GPU runs: one PTX div.rn.f32 becomes ~10 SASS instructions and
a branch). It measures code, not time. A quant's fallback for scales outside
[2**-64, 2**64] (IEEE division per element, never taken for real scales) is left out of
the count. Why it matters: an H200 issues at most about 3.3e13 thread instructions per
second (132 SMs x 4 schedulers x 32 threads x 1.98 GHz) and moves
about 4.2e12 bytes per second (copy bandwidth measured there), so a kernel needing more
than ~8 instructions per byte cannot run at memory speed. On the H200 (bench/RESULTS.md)
the kernels' fraction of copy bandwidth fell as this ratio rose.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import replace

os.environ.pop("TRITON_INTERPRET", None)  # compile for the GPU (before Triton is imported)

import torch  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=4096)
    args = p.parse_args()

    from triton.backends.compiler import GPUTarget

    from vllm_xdsl.backends.triton.aot import (
        compile_spec,
        ptx_instructions,
        record_launches,
        sass_instructions,
    )
    from vllm_xdsl.backends.triton.emit import emit_source
    from vllm_xdsl.backends.triton.emit_common import FALLBACK_DIVISION
    from vllm_xdsl.backends.triton.functions import FUNCTIONS as F

    def usual_path(spec) -> str:  # noqa: ANN001 - the source without the far-scale branch
        src = emit_source(spec)
        out, n = re.subn(rf"{re.escape(FALLBACK_DIVISION)}\n(\s+)q = tl\.div_rn\(.*\)",
                         r"else:\n\1q = y", src)
        if n != src.count(FALLBACK_DIVISION):  # the emitted branch changed shape
            raise SystemExit(f"{spec.name}: cannot drop the far-scale division branch")
        return out

    h, f8 = args.hidden, torch.float8_e4m3fn
    x = torch.randn(8, h).to(torch.bfloat16)
    w = torch.randn(h).to(torch.bfloat16)
    s = torch.tensor([0.02])
    # (case, call, bytes moved per element: inputs read + outputs written)
    cases = [
        ("rms_norm", lambda: F["rms_norm"](x, w, 1e-6), 4),
        ("fused_add_rms_norm", lambda: F["fused_add_rms_norm"](x, x, w, 1e-6), 8),
        ("static_scaled_fp8_quant", lambda: F["static_scaled_fp8_quant"](x, s), 3),
        ("dynamic_per_token_scaled_fp8_quant",
         lambda: F["dynamic_per_token_scaled_fp8_quant"](x), 3),
        ("per_token_group_fp8_quant", lambda: F["per_token_group_fp8_quant"](x, 128), 3),
        ("static_scaled_int8_quant", lambda: F["static_scaled_int8_quant"](x, s), 3),
        ("dynamic_per_token_scaled_int8_quant",
         lambda: F["dynamic_per_token_scaled_int8_quant"](x), 3),
        ("silu_and_mul", lambda: F["silu_and_mul"](torch.cat([x, x], -1)), 6),
        ("rms_norm_quant[static]",
         lambda: F["rms_norm_quant"](x, w, 1e-6, s, None, f8, True, "tensor"), 3),
        ("fused_add_rms_norm_quant[static]",
         lambda: F["fused_add_rms_norm_quant"](x, x, w, 1e-6, s, None, f8, True, "tensor"), 7),
        ("rms_norm_quant[token]",
         lambda: F["rms_norm_quant"](x, w, 1e-6, None, None, f8, False, "token"), 3),
        ("rms_norm_quant[group128]",
         lambda: F["rms_norm_quant"](x, w, 1e-6, None, None, f8, False, "group", 128), 3),
        ("silu_and_mul_quant[static]",
         lambda: F["silu_and_mul_quant"](torch.cat([x, x], -1), s, None, f8, True, "tensor"), 5),
    ]
    target = GPUTarget("cuda", 90, 32)
    print(f"instructions per element, sm_90, bf16, hidden {h} (one row per program); "
          "emulated: f32 roundings, hw: hw_casts")
    print("| kernel | bytes | PTX emulated | SASS emulated | SASS hw | SASS emulated / byte "
          "| SASS hw / byte |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, run, nbytes in cases:
        (spec, call), = record_launches(run).items()
        per_thread = spec.block_size // (32 * spec.num_warps)
        emulated, hw = (compile_spec(sp, call, target, usual_path(sp))[-1]
                        for sp in (spec, replace(spec, hw_casts=True)))
        ptx = ptx_instructions(emulated.asm["ptx"]) / per_thread
        sass = [sass_instructions(k.asm["cubin"]) / per_thread for k in (emulated, hw)]
        print(f"| {name} | {nbytes} | {ptx:.1f} | {sass[0]:.1f} | {sass[1]:.1f} | "
              f"{sass[0] / nbytes:.1f} | {sass[1] / nbytes:.1f} |")


if __name__ == "__main__":
    main()
