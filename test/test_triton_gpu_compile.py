"""Every generated Triton kernel compiles for real GPUs, on a machine without one.

The other Triton tests run the kernels in Triton's CPU interpreter, which accepts code that
the GPU compiler rejects (types, constexpr use, layouts). Here each distinct kernel of the
verify grid is compiled ahead of time, through Triton's own compiler and bundled ptxas /
lld, for an H100/H200 (sm_90) and, for the ROCm flavours (e4m3fnuz, int8), an MI300
(gfx942): exactly what the first launch on such a GPU compiles. Nothing is launched.

It runs in a subprocess without TRITON_INTERPRET: a process that imported Triton in
interpreter mode holds interpreted standard-library functions that the GPU compiler
cannot use.
"""

from __future__ import annotations

import linecache
import os
import subprocess
import sys
import types
from typing import Any

import pytest
import torch

from vllm_xdsl.backends.triton.spec import KernelSpec

POINTER = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32",
           torch.uint8: "*u8", torch.int8: "*i8", torch.int32: "*i32"}


def _jit_kernels(spec: KernelSpec) -> list:
    """The spec's kernels as GPU JITFunctions (not interpreted), in launch order."""
    from vllm_xdsl.backends.triton.emit import emit_kernels, emit_source

    source = emit_source(spec)
    name = f"vllm_xdsl_gpu_compile_check.{spec.name}"
    filename = f"<{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return [getattr(module, k) for k in emit_kernels(spec)]


def _signature(kernel: Any, args: tuple, meta: dict) -> tuple[dict, dict]:
    values = dict(zip(kernel.arg_names, args, strict=False)) | meta
    signature, constexprs = {}, {}
    for p in kernel.params:
        v = values[p.name]
        if p.is_constexpr or v is None:
            signature[p.name], constexprs[p.name] = "constexpr", v
        elif isinstance(v, torch.Tensor):
            signature[p.name] = POINTER[v.dtype]
        elif isinstance(v, bool):
            signature[p.name] = "i1"
        elif isinstance(v, int):
            signature[p.name] = "i32" if -(2**31) <= v < 2**31 else "i64"
        else:
            assert isinstance(v, float), (p.name, type(v))
            signature[p.name] = "fp32"
    return signature, constexprs


def _launches(op: str) -> dict[KernelSpec, tuple]:
    """Each distinct spec the op's verify-grid cases launch, with one launch's arguments."""
    from vllm_xdsl.backends.triton import launch
    from vllm_xdsl.backends.triton.functions import FUNCTIONS
    from vllm_xdsl.ops.grid import cases

    seen: dict[KernelSpec, tuple] = {}

    def record(spec: KernelSpec, tokens: int, *args: Any, prologue: tuple = ()) -> None:
        seen.setdefault(spec, (args, prologue))

    real, launch._launch = launch._launch, record
    try:
        for case in cases(op, False, "cpu"):
            FUNCTIONS[op](*case.args)
    finally:
        launch._launch = real
    return seen


def compile_all() -> int:
    """Compile every op's kernels; one line per op; the number of failures."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from vllm_xdsl import ops

    targets = {"sm_90": GPUTarget("cuda", 90, 32), "gfx942": GPUTarget("hip", "gfx942", 64)}
    failures = 0
    for op in ops.ALL_OPS:
        launches, compiled, problem = _launches(op), 0, None
        for spec, (args, prologue) in launches.items():
            rocm = spec.scheme is not None and spec.scheme.dtype in (
                torch.float8_e4m3fnuz, torch.int8)
            kernels = _jit_kernels(spec)
            all_args = [prologue] * (len(kernels) - 1) + [args]
            for kernel, kernel_args in zip(kernels, all_args, strict=True):
                signature, constexprs = _signature(kernel, kernel_args, {"BLOCK": spec.block_size})
                for arch in ("sm_90", "gfx942") if rocm else ("sm_90",):
                    try:
                        triton.compile(ASTSource(kernel, signature, constexprs),
                                       target=targets[arch], options={"num_warps": spec.num_warps})
                        compiled += 1
                    except Exception as e:  # the kernel and target, not only the MLIR error
                        first = (str(e).strip().splitlines() or [""])[0]
                        problem = problem or f"{spec.name} for {arch}: {type(e).__name__}: {first}"
        failures += problem is not None or not launches
        print(f"{op}: {problem or f'{compiled} kernel compilations ok'}", flush=True)
    return failures


def test_kernels_compile_for_gpus() -> None:
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert run.stdout.count("compilations ok") == len(_op_names()), run.stdout


def _op_names() -> list[str]:
    from vllm_xdsl import ops

    return list(ops.ALL_OPS)


if __name__ == "__main__":
    sys.exit(1 if compile_all() else 0)
