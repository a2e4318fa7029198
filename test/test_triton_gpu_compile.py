"""Every generated Triton kernel compiles for real GPUs, on a machine without one.

The other Triton tests run the kernels in Triton's CPU interpreter, which accepts code that
the GPU compiler rejects (types, constexpr use, layouts). Here each distinct kernel of the
verify grid is compiled ahead of time, through Triton's own compiler and bundled ptxas /
lld, for an H100/H200 (sm_90) and, for the ROCm flavours (e4m3fnuz, int8), an MI300
(gfx942): exactly what the first launch on such a GPU compiles. Nothing is launched.
Specs in bf16 or with e4m3fn output are also compiled with `hw_casts` for sm_90, and their
PTX must use the conversion instructions (cvt.rn.bf16 / cvt.rn.satfinite.e4m3x2) in place of
the f32 emulation.

It runs in a subprocess without TRITON_INTERPRET: a process that imported Triton in
interpreter mode holds interpreted standard-library functions that the GPU compiler
cannot use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
import torch

from vllm_xdsl.backends.triton.spec import QUANT_OPS, KernelSpec

QUANT_ONLY = tuple(QUANT_OPS)  # unfused quants read bf16 but never round to it


def _on_gpu(args: dict[str, Any]) -> dict[str, Any]:
    from vllm_xdsl.ops.impl import TensorMeta

    return {k: replace(v, device="cuda") if isinstance(v, TensorMeta) else v
            for k, v in args.items()}


def compile_all() -> int:
    """Compile every op's kernels; one line per op; the number of failures."""
    from triton.backends.compiler import GPUTarget

    from vllm_xdsl import ops
    from vllm_xdsl.backends.triton.aot import compile_spec, record_launches
    from vllm_xdsl.backends.triton.functions import FUNCTIONS
    from vllm_xdsl.ops.dispatch import meta_args
    from vllm_xdsl.ops.grid import cases

    targets = {"sm_90": GPUTarget("cuda", 90, 32), "gfx942": GPUTarget("hip", "gfx942", 64)}
    failures = 0
    for op in ops.ALL_OPS:
        if "triton" not in ops.ALL_OPS[op].impls():
            continue  # an op the Triton family does not implement (none today)
        # The cases the Triton provider takes on a GPU (verify skips the others for it).
        triton = next(i for i in ops.registry.implementations(op, "triton"))
        grid = [c for c in cases(op, False, "cpu")
                if not triton.rejects(_on_gpu(meta_args(op, c.args, c.kwargs)))]
        launches = record_launches(lambda op=op, grid=grid: [FUNCTIONS[op](*c.args, **c.kwargs) for c in grid]
                                   + [FUNCTIONS[op](*a, **k) for a, k in _beyond_the_grid(op)])
        variants = list(launches.items())
        variants += [(replace(spec, hw_casts=True), call) for spec, call in launches.items()
                     if _hw_applies(spec)]
        compiled, problem = 0, None
        for spec, call in variants:
            rocm = not spec.hw_casts and spec.scheme is not None and spec.scheme.dtype in (
                torch.float8_e4m3fnuz, torch.int8)
            for arch in ("sm_90", "gfx942") if rocm else ("sm_90",):
                try:
                    binaries = compile_spec(spec, call, targets[arch])
                except Exception as e:  # the kernel and target, not only the MLIR error
                    first = (str(e).strip().splitlines() or [""])[0]
                    problem = problem or f"{spec.name} for {arch}: {type(e).__name__}: {first}"
                    continue
                compiled += len(binaries)
                if spec.hw_casts:
                    problem = problem or _missing_conversion(spec, binaries[-1].asm["ptx"])
        failures += problem is not None or not launches
        print(f"{op}: {problem or f'{compiled} kernel compilations ok'}", flush=True)
    return failures


def _beyond_the_grid(op: str) -> list[tuple[tuple, dict[str, Any]]]:
    """Calls whose kernels the grid lacks: a zero point per group ([T, G] with G > 1; the
    grid's rows are one group), unfused and fused, as compressed-tensors' FP8_BLOCK has it."""
    x, zp = torch.randn(3, 256, dtype=torch.bfloat16), torch.ones(3, 2, dtype=torch.bfloat16)
    variant = f"quotient bf16 scale bf16 zero_eps {torch.finfo(torch.bfloat16).eps}"
    fused = (None, None, torch.float8_e4m3fn, False, "group", 128, False, False, 1e-10, zp,
             variant)
    return {
        "per_token_group_fp8_quant": [((x, 128, False, False, 1e-10, torch.float8_e4m3fn, zp,
                                        variant), {})],
        "rms_norm_quant": [((x, None, 1e-6, *fused), {})],
        "fused_add_rms_norm_quant": [((x, x, None, 1e-6, *fused), {})],
        "silu_and_mul_quant": [((torch.randn(3, 512, dtype=torch.bfloat16), *fused), {})],
    }.get(op, [])


def _hw_applies(spec: KernelSpec) -> bool:
    """Whether hw_casts changes the spec's source: a bf16 rounding or an e4m3fn output."""
    e4m3fn = spec.scheme is not None and spec.scheme.dtype == torch.float8_e4m3fn
    bf16 = torch.bfloat16 in (spec.dtype, spec.weight_dtype) and spec.op not in QUANT_ONLY
    return e4m3fn or bf16


def _missing_conversion(spec: KernelSpec, ptx: str) -> str | None:
    wanted = []
    if spec.scheme is not None and spec.scheme.dtype == torch.float8_e4m3fn:
        wanted.append("cvt.rn.satfinite.e4m3x2.f32")
    if spec.dtype == torch.bfloat16 and spec.op not in QUANT_ONLY:
        wanted.append("cvt.rn.bf16")
    missing = [w for w in wanted if w not in ptx]
    return f"{spec.name}: no {', '.join(missing)} in its PTX" if missing else None


def test_kernels_compile_for_gpus() -> None:
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.count("compilations ok") == len(_op_names()), run.stdout


def _op_names() -> list[str]:
    from vllm_xdsl import ops

    return [op for op, semantic in ops.ALL_OPS.items() if "triton" in semantic.impls()]


if __name__ == "__main__":
    sys.exit(1 if compile_all() else 0)
