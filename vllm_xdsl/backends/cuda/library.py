"""Load the compiled kernel library with ctypes and call its extern "C" launchers.

Each launcher returns 0 or an error code; `vx_last_error()` holds the one-line reason. The
argument lists here mirror csrc/vx_kernels.cu exactly (ctypes cannot check them).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from ctypes import c_float, c_int, c_int64, c_void_p
from pathlib import Path

from vllm_xdsl.backends.cuda.build import BuildError, ToolchainMissing, Vendor, build_library

# Activation dtype codes and quant scheme codes (enums of vx_kernels.cu / kernels.cuh).
DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}
S_NONE, S_STATIC_FP8, S_STATIC_I8, S_TOKEN_FP8, S_TOKEN_I8, S_GROUP_FP8 = range(6)
# The act-and-mul producers of kernels.cuh, by activation (ops/activations.py).
ACTIVATION_CODES = {"silu": 3, "gelu": 4, "gelu_tanh": 5}

_P, _I, _L, _F = c_void_p, c_int, c_int64, c_float
# The quant-scheme tail shared by the quant launchers (VX_QUANT_ARGS).
_QUANT = [_P, _P, _I, _I, _F, _L, _L, _L, _I, _F, _P]  # ..., const Variant* (variant.py)
SIGNATURES: dict[str, list] = {
    "vx_check_device": [],
    "vx_use_device": [_I],
    "vx_rms_norm": [_P, _P, _P, _L, _L, _L, _L, _F, _I, _I, _P],
    "vx_fused_add_rms_norm": [_P, _P, _P, _P, _P, _L, _L, _L, _L, _L, _L, _F, _I, _I, _I, _P],
    "vx_act_and_mul": [_P, _P, _P, _L, _L, _L, _L, _I, _I, _P],
    "vx_quant": [_P, _P, _P, _L, _L, _L, *_QUANT, _I, _P],
    "vx_rms_norm_quant": [_P, _P, _P, _P, _L, _L, _L, _F, *_QUANT, _I, _I, _P],
    "vx_fused_add_rms_norm_quant": [_P, _P, _P, _P, _P, _P, _L, _L, _L, _L, _F, _I, *_QUANT, _I,
                                    _I, _P],
    "vx_act_and_mul_quant": [_P, _P, _P, _P, _L, _L, _L, _L, _I, *_QUANT, _I, _P],
    "vx_dynamic_scaled_fp8_quant": [_P, _P, _P, _L, _L, _L, _I, _F, _P, _P, _I, _P],
}


class DeviceUnavailable(RuntimeError):
    """A kernel was called where it cannot run (CPU tensors, no GPU, no driver)."""


class KernelLibrary:
    """The loaded library: `lib.call("vx_rms_norm", *args, op="rms_norm")`."""

    def __init__(self, path: Path, vendor: Vendor) -> None:
        self.path = path
        self.vendor = vendor
        try:
            self._lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise DeviceUnavailable(f"cannot load {path.name}: {e}") from None
        self._lib.vx_last_error.restype = ctypes.c_char_p
        self._lib.vx_last_error.argtypes = []
        for name, argtypes in SIGNATURES.items():
            fn = getattr(self._lib, name)
            fn.restype = c_int
            fn.argtypes = argtypes

    def last_error(self) -> str:
        return (self._lib.vx_last_error() or b"").decode(errors="replace")

    def device_problem(self) -> str | None:
        """None when the runtime sees a device, else why not (no driver, no GPU)."""
        return self.last_error() if self._lib.vx_check_device() else None

    def call(self, name: str, *args: object, op: str) -> None:
        if getattr(self._lib, name)(*args) != 0:
            raise DeviceUnavailable(f"vllm_xdsl_{self.vendor}::{op}: {self.last_error()}")


@functools.cache
def load_library(vendor: Vendor, archs: tuple[str, ...], sources: Path | None = None
                 ) -> KernelLibrary:
    """Build (or fetch from the cache) and load the library for `archs`."""
    return KernelLibrary(build_library(vendor, archs, sources), vendor)


def exported_symbols(path: Path) -> set[str]:
    """Dynamic symbols a library defines (what `nm -D --defined-only` lists)."""
    import subprocess

    res = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True,
                         text=True, timeout=60, check=True)
    return {ln.split()[-1] for ln in res.stdout.splitlines() if ln.strip()}


__all__: Sequence[str] = (
    "BuildError", "DeviceUnavailable", "KernelLibrary", "ToolchainMissing", "load_library",
    "exported_symbols", "DTYPE_CODES", "SIGNATURES",
)
