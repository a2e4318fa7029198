"""Host cost of one cpu-provider op call at T=1, the kernel stubbed: the Python kernel
against the C++ operator kernel (backends/cpu/op_csrc), side by side with vLLM's `_C` op.

    PYTHONPATH=$PWD /work/main/.venv-vllm/bin/python bench/cpu_op_overhead.py

The launchers are replaced by a stub library (each returns 0 at once), so this runs on any
x86-64 host with g++ (not only one that can run the kernels) and times only what surrounds
a kernel: argument checks, output allocation, the call. For the same call it times, in one
process, interleaved:

- python fn: the Python launcher function called directly (the cpu provider's eager path
  before the operator kernels);
- python op: the torch op with only its Python kernel (what a compiled graph called);
- C++ op: the torch op with the C++ kernel on its CPU key (what both call now);
- vLLM _C: vLLM's CPU op for the same computation, kernel included (not stubbed), where
  vLLM is importable; an output allocated per call, as vLLM's wrappers do.

One token, hidden 2048, bf16, one thread; µs per call, the minimum over rounds.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from vllm_xdsl.backends.cpu.op_library import load_op_library
from vllm_xdsl.backends.cuda import library as L
from vllm_xdsl.backends.cuda.kernels import Kernels
from vllm_xdsl.backends.cuda.torch_ops import define

H = 2048
EPS = 1e-6


def stub_library(root: Path) -> Path:
    """Every launcher of library.py's SIGNATURES (and vx_last_error) returning at once.
    Written in C without prototypes: the x86-64 calling convention lets an unprototyped
    function ignore its arguments."""
    src = "\n".join(["const char* vx_last_error() { return \"\"; }",
                     *(f"int {name}() {{ return 0; }}" for name in L.SIGNATURES)])
    out = root / "vx_stub.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-x", "c", "-", "-o", str(out)],
                   input=src, text=True, check=True)
    return out


def per_call(fn: Callable[[], object], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def calling(f: Callable[..., object], args: tuple[Any, ...]) -> Callable[[], object]:
    return lambda: f(*args)


def vllm_ops() -> Any:
    try:  # optional (imported by name: no type information)
        importlib.import_module("vllm.platforms").current_platform.import_kernels()
        return torch.ops._C if hasattr(torch.ops._C, "rms_norm") else None
    except Exception:  # no vLLM here: the column stays empty
        return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20000, help="calls per timed batch")
    p.add_argument("--rounds", type=int, default=5)
    ns = p.parse_args()
    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="vx_cpu_op_overhead_"))
    stub = stub_library(root)
    kernels = Kernels("cpu", emulation=L.KernelLibrary(stub, "cpu"))
    fn = define("cpu", kernels)
    py_op = torch.ops.vllm_xdsl_cpu_stubpy
    define("cpu", kernels, "vllm_xdsl_cpu_stubpy")
    define("cpu", kernels, "vllm_xdsl_cpu_stub")
    t0 = time.perf_counter()
    load_op_library(stub, "vllm_xdsl_cpu_stub")
    build_s = time.perf_counter() - t0
    cpp_op = torch.ops.vllm_xdsl_cpu_stub
    C = vllm_ops()

    x = torch.randn(1, H).to(torch.bfloat16)
    r = torch.randn(1, H).to(torch.bfloat16)
    w = torch.randn(H).to(torch.bfloat16)
    x2 = torch.randn(1, 2 * H).to(torch.bfloat16)
    s = torch.tensor([0.05])
    i8 = (torch.int8, True, "tensor")

    def vllm_rms() -> object:
        out = torch.empty_like(x)
        C.rms_norm(out, x, w, EPS)
        return out

    def vllm_silu() -> object:
        out = torch.empty(1, H, dtype=x.dtype)
        C.silu_and_mul(out, x2)
        return out

    def vllm_i8() -> object:
        q = torch.empty(x.shape, dtype=torch.int8)
        C.static_scaled_int8_quant(q, x, s, None)
        return q

    def vllm_i8_token() -> object:
        q = torch.empty(x.shape, dtype=torch.int8)
        scales = torch.empty(1, 1)
        C.dynamic_scaled_int8_quant(q, x, scales, None)
        return q, scales

    cases: dict[str, tuple[Callable[..., Any], tuple[Any, ...], Callable[[], object] | None]] = {
        "rms_norm": (lambda o: o.rms_norm, (x, w, EPS), vllm_rms),
        "fused_add_rms_norm_ (in place)": (
            lambda o: o.fused_add_rms_norm_, (x, r, w, EPS),
            lambda: C.fused_add_rms_norm(x, r, w, EPS)),
        "silu_and_mul": (lambda o: o.silu_and_mul, (x2,), vllm_silu),
        "static_scaled_int8_quant": (lambda o: o.static_scaled_int8_quant, (x, s), vllm_i8),
        "dynamic_per_token_scaled_int8_quant": (
            lambda o: o.dynamic_per_token_scaled_int8_quant, (x,), vllm_i8_token),
        "rms_norm_quant[i8-static]": (lambda o: o.rms_norm_quant, (x, w, EPS, s, None, *i8),
                                      None),
        "fused_add_rms_norm_quant_[i8-static]": (
            lambda o: o.fused_add_rms_norm_quant_, (x, r, w, EPS, s, None, *i8), None),
    }
    load = os.getloadavg()
    print(f"1 token, hidden {H}, bf16, 1 thread; torch {torch.__version__}; "
          f"{'vLLM _C' if C is not None else 'no vLLM'}; load average {load[0]:.1f}; "
          f"operator library build {build_s:.1f} s")
    print(f"{'op':<38} {'python fn':>10} {'python op':>10} {'C++ op':>8} {'vLLM _C':>8}"
          f" {'py op/C++':>9} {'vLLM/C++':>8}")
    for name, (get, args, vllm) in cases.items():
        fns: dict[str, Callable[[], object] | None] = {
            "python fn": calling(get(fn), args), "python op": calling(get(py_op), args),
            "C++ op": calling(get(cpp_op), args), "vLLM _C": vllm if C is not None else None}
        best = {k: float("inf") for k in fns}
        for f in fns.values():
            if f is not None:
                f()
        for _ in range(ns.rounds):
            for k, f in fns.items():
                if f is not None:
                    best[k] = min(best[k], per_call(f, ns.calls) * 1e6)
        v = best["vLLM _C"]
        print(f"{name:<38} {best['python fn']:>10.2f} {best['python op']:>10.2f} "
              f"{best['C++ op']:>8.2f} {v:>8.2f} {best['python op'] / best['C++ op']:>9.1f} "
              f"{v / best['C++ op'] if v != float('inf') else float('nan'):>8.2f}")
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} at end")


if __name__ == "__main__":
    main()
