"""Provider `cpu`: the CUDA backend's kernel family compiled for the host CPU (opt-in:
target cpu's default priority stays native, for the reasons policy.PLATFORM_DEFAULTS gives).

One library (csrc/vx_cpu.cpp) implements the extern "C" launchers of
backends/cuda/csrc/vx_kernels.cu with SIMD row kernels (AVX-512, or AVX2 + FMA + F16C with
the same bits: csrc/vx_vec.h) on torch's OpenMP pool, reusing that source's Params,
producers, schemes, variant epilogue and scalar numerics. So the
Python side is the CUDA backend's as well (kernels.Kernels, torch_ops.define("cpu"),
register.register("cpu")): the same launchers, argument checks and torch ops
(`torch.ops.vllm_xdsl_cpu.<op>`), every op and variant the CUDA family implements. The
library is built just in time with g++ -march=native into VLLM_XDSL_CACHE_DIR (build.py).

A Python kernel costs more than the kernel itself on one token, so the ops' CPU dispatch
key gets C++ kernels too (op_csrc/vx_cpu_ops.cpp, built against torch's headers and loaded
beside the library by op_library.py): they take the common cases (contiguous rows, the
default numerics) and hand the others to the Python kernels.
"""

from __future__ import annotations

from typing import Final, Literal

PROVIDER: Final[Literal["cpu"]] = "cpu"


def register() -> None:
    """The `vllm_xdsl.providers` entry point."""
    from vllm_xdsl.backends.cuda.register import register as register_family

    register_family(PROVIDER)
