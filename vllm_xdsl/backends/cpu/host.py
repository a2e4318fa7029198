"""What the host must offer to build and run the cpu kernels, and the library itself."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from vllm_xdsl.backends.cuda.build import ToolchainMissing, find_compiler

# The instruction sets vx_cpu.cpp needs at least (csrc/vx_vec.h refuses to compile without
# them; it takes AVX-512 F/BW/VL/DQ where the CPU has them too).
REQUIRED_FLAGS = ("avx2", "fma", "f16c")
CPUINFO = Path("/proc/cpuinfo")


@functools.cache
def cpu_flags() -> frozenset[str]:
    try:
        text = CPUINFO.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


@functools.cache
def isa_key() -> str:
    """The arch name of the build: -march=native compiles for this CPU's flags, so a cache
    shared with another CPU never hands it a library built for other instructions."""
    return "native-" + hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:10]


def host_problem() -> str | None:
    """Why this machine cannot build or run the cpu kernels, or None."""
    missing = [f for f in REQUIRED_FLAGS if f not in cpu_flags()]
    if missing:
        return f"cpu: this CPU lacks {', '.join(missing)} (the kernels need AVX2, FMA and F16C)"
    try:
        find_compiler("cpu")
    except ToolchainMissing as e:
        return f"cpu: {e}"
    from vllm_xdsl.backends.cpu.op_library import torch_headers_problem

    problem = torch_headers_problem()
    return None if problem is None else f"cpu: {problem}"
