"""Compile emitted kernels for a GPU ahead of time, on any machine (no GPU, no launch).

Triton's compiler runs with its bundled ptxas / lld for an explicit target (sm_90, gfx942),
so CI can check that every generated kernel compiles for real GPUs, and its PTX can be
read. The process must not interpret Triton (TRITON_INTERPRET unset when Triton was
imported): interpreted standard-library functions cannot be compiled.

    launches = record_launches(lambda: FUNCTIONS["rms_norm"](x, w, 1e-6))
    for spec, call in launches.items():
        binaries = compile_spec(spec, call, GPUTarget("cuda", 90, 32))
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from vllm_xdsl.backends.triton import launch
from vllm_xdsl.backends.triton.compile import exec_source
from vllm_xdsl.backends.triton.emit import emit_kernels, emit_source
from vllm_xdsl.backends.triton.spec import KernelSpec

_POINTER = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32",
            torch.uint8: "*u8", torch.int8: "*i8", torch.int32: "*i32"}


@dataclass(frozen=True)
class Launch:
    """The arguments of one launch of a spec: the last kernel's and, for two-kernel ops,
    the first (absmax) kernel's."""

    args: tuple
    prologue: tuple = ()


def record_launches(run: Callable[[], Any]) -> dict[KernelSpec, Launch]:
    """Each distinct spec that `run()`'s launcher calls would launch, with one launch's
    arguments; nothing is launched (outputs are left as allocated)."""
    seen: dict[KernelSpec, Launch] = {}

    def record(spec: KernelSpec, tokens: int, *args: Any, prologue: tuple = ()) -> None:
        seen.setdefault(spec, Launch(args, prologue))

    real, launch._launch = launch._launch, record
    try:
        run()
    finally:
        launch._launch = real
    return seen


def jit_kernels(spec: KernelSpec, source: str | None = None) -> list[Any]:
    """The spec's kernels as (not interpreted) JITFunctions, in launch order. `source`: a
    variant of the spec's emitted source to compile instead."""
    # Its own module name: get_module's (interpreted, in a test process) stays untouched.
    name = f"vllm_xdsl_triton_aot.{spec.name}" + ("" if source is None else "_variant")
    module = exec_source(emit_source(spec) if source is None else source, name)
    return [getattr(module, k) for k in emit_kernels(spec)]


def signature(kernel: Any, args: tuple, meta: dict[str, Any]) -> tuple[dict, dict, dict]:
    """Triton's (signature, constexprs, attrs) of a launch of `kernel` with `args` and
    `meta`. attrs marks what Triton's launcher would specialize on: pointers aligned to 16
    bytes and integers divisible by 16 (without it, loads would not be vectorized)."""
    values = dict(zip(kernel.arg_names, args, strict=False)) | meta
    sig, constexprs, attrs = {}, {}, {}
    for i, p in enumerate(kernel.params):
        v = values[p.name]
        if p.is_constexpr or v is None:
            sig[p.name], constexprs[p.name] = "constexpr", v
            continue
        if isinstance(v, torch.Tensor):
            sig[p.name] = _POINTER[v.dtype]
            aligned = v.data_ptr() % 16 == 0
        elif isinstance(v, bool):
            sig[p.name], aligned = "i1", False
        elif isinstance(v, int):
            sig[p.name] = "i32" if -(2**31) <= v < 2**31 else "i64"
            aligned = v % 16 == 0
        elif isinstance(v, float):
            sig[p.name], aligned = "fp32", False
        else:
            raise TypeError(f"{kernel.__name__}: argument {p.name} of type {type(v).__name__}")
        if aligned:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, constexprs, attrs


def compile_spec(spec: KernelSpec, call: Launch, target: Any, source: str | None = None
                 ) -> list[Any]:
    """The compiled kernels of `spec` (or of a variant `source` of its emitted source) for
    `target` (a triton GPUTarget), in launch order."""
    import triton
    from triton.compiler import ASTSource

    kernels = jit_kernels(spec, source)
    all_args = [call.prologue] * (len(kernels) - 1) + [call.args]
    out = []
    for kernel, args in zip(kernels, all_args, strict=True):
        sig, constexprs, attrs = signature(kernel, args, {"BLOCK": spec.block_size})
        out.append(triton.compile(ASTSource(kernel, sig, constexprs, attrs), target=target,
                                  options={"num_warps": spec.num_warps}))
    return out


def ptx_instructions(ptx: str) -> int:
    """Instructions in a PTX listing (no directives, labels, braces or comments). The
    kernels have no loops: a thread executes each once."""
    return sum(
        1 for line in map(str.strip, ptx.splitlines())
        if line and not line.startswith(("//", ".", "{", "}", "$")) and not line.endswith(":")
    )


# "/*0a30*/  @!P4 BRA `(.L_x_1) ;": an instruction, optionally predicated.
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_.]*)")


def sass_instructions(cubin: bytes) -> int:
    """Machine instructions in the entry function of a cubin (what the GPU executes; PTX
    hides expansions such as div.rn.f32's ~10 instructions). Padding NOPs and out-of-line
    subroutines (the rarely taken slow path of a division) are not counted; the branches
    that lead there are. Disassembled with the nvdisasm that Triton ships."""
    import triton

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        listing = subprocess.run([triton.knobs.nvidia.nvdisasm.path, "-c", str(path)],
                                 capture_output=True, text=True, check=True, timeout=60).stdout
    count = 0
    for line in listing.splitlines():
        if "@function" in line and "$__internal" in line:
            break  # the entry function ends where the subroutines begin
        m = _SASS_LINE.match(line)
        if m and m.group(1) != "NOP":
            count += 1
    return count
