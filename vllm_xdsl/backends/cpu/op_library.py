"""The cpu provider's torch operator kernels (op_csrc/vx_cpu_ops.cpp): built just in time
against torch's headers and a kernel library, cached like it, loaded into torch.

The ops themselves are defined in Python (backends/cuda/torch_ops.py); loading this library
adds C++ kernels on their CPU dispatch key, which hand every case they do not take back to
the Python kernels. Nothing here runs at import: the first call of a cpu op builds and loads
it (kernels.Kernels._prepare), so the first call runs in Python and the next ones in C++.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from vllm_xdsl import user_cache
from vllm_xdsl.backends.cuda import build as B
from vllm_xdsl.backends.cuda import library as L
from vllm_xdsl.core.catalog import QuantForm, quant_specs
from vllm_xdsl.core.dtypes import INT8_MAX, fp8_max
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.ops.activations import ACTIVATIONS, FUSED_ACT_OPS, activation_of

OP_CSRC = Path(__file__).parent / "op_csrc"
SOURCE = OP_CSRC / "vx_cpu_ops.cpp"
NAMESPACE = "vllm_xdsl_cpu"
TORCH_DIR = Path(torch.__file__).parent


def torch_headers_problem() -> str | None:
    """Why torch's C++ headers or libraries are missing here (a wheel without them), or None."""
    for need in (TORCH_DIR / "include" / "torch" / "library.h", TORCH_DIR / "lib"):
        if not need.exists():
            return f"torch's C++ headers are missing ({need} not found)"
    return None


# The unfused quant forms vx_cpu_ops.cpp has a kernel for (its `Form` enum). An op of
# another form keeps only its Python kernel, which calls the same launchers.
CPP_FORMS: dict[QuantForm, str] = {
    QuantForm("fp8", True, "tensor"): "STATIC_FP8", QuantForm("int8", True, "tensor"): "STATIC_I8",
    QuantForm("fp8", False, "token"): "TOKEN_FP8", QuantForm("int8", False, "token"): "TOKEN_I8",
    QuantForm("fp8", False, "group"): "GROUP_FP8", QuantForm("fp8", False, "tensor"): "TENSOR_FP8",
}


def _defines(namespace: str) -> list[str]:
    """The -D constants of vx_cpu_ops.cpp, from the modules that define them."""
    catalog_ops = "".join((
        *(f"X({s.name},unfused_quant<{CPP_FORMS[s.form]}>)" for s in quant_specs()
          if s.form in CPP_FORMS),
        *(f"X({name},act_and_mul<{L.ACTIVATION_CODES[act]}>)" for name, act in ACTIVATIONS.items()
          if act in L.ACTIVATION_CODES),
        *(f"X({name},act_and_mul_quant<{L.ACTIVATION_CODES[act]}>)" for name in FUSED_ACT_OPS
          if (act := activation_of(name)) in L.ACTIVATION_CODES),
    ))
    codes = {"D_F32": L.DTYPE_CODES["float32"], "D_F16": L.DTYPE_CODES["float16"],
             "D_BF16": L.DTYPE_CODES["bfloat16"], "S_STATIC_FP8": L.S_STATIC_FP8,
             "S_STATIC_I8": L.S_STATIC_I8, "S_TOKEN_FP8": L.S_TOKEN_FP8,
             "S_TOKEN_I8": L.S_TOKEN_I8, "S_GROUP_FP8": L.S_GROUP_FP8}
    maxima = {"FMAX_E4M3FN": fp8_max(torch.float8_e4m3fn),
              "FMAX_E4M3FNUZ": fp8_max(torch.float8_e4m3fnuz), "IMAX": INT8_MAX}
    return [f"-DVX_NAMESPACE={namespace}", f"-DVX_CATALOG_OPS={catalog_ops}",
            *(f"-DVX_{k}={v}" for k, v in codes.items()),
            *(f"-DVX_{k}={v!r}f" for k, v in maxima.items())]


def compile_command(compiler: str, namespace: str, out: Path) -> list[str]:
    """The operator kernels compiled to an object: nothing of the kernel library is read, so
    this runs while that library builds (prepare_object)."""
    abi = int(torch.compiled_with_cxx11_abi())
    return [compiler, "-std=c++17", "-O2", "-c", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            *_defines(namespace), "-isystem", str(TORCH_DIR / "include"),
            "-I", str(B.CPU_CSRC), str(SOURCE), "-o", str(out)]


def link_command(compiler: str, obj: Path, kernels: Path, out: Path) -> list[str]:
    """Linked against `kernels` by file name, found beside the result ($ORIGIN: both live in
    the cache directory); torch's libraries are the ones the process has loaded."""
    lib = TORCH_DIR / "lib"
    return [compiler, "-shared", str(obj), "-o", str(out),
            f"-L{kernels.parent}", f"-l:{kernels.name}", "-Wl,-rpath,$ORIGIN",
            f"-L{lib}", "-lc10", "-ltorch_cpu", f"-Wl,-rpath,{lib}"]


def cache_key(namespace: str) -> str:
    h = hashlib.sha256()
    for path in (SOURCE, B.CPU_CSRC / "vx_launchers.h"):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(B.compiler_version("cpu").encode() + torch.__version__.encode())
    h.update("\0".join(compile_command("CC", namespace, Path("OUT"))).encode())
    return h.hexdigest()[:20]


def prepare_object(namespace: str = NAMESPACE) -> Path:
    """The compiled operator kernels (an object in the cache directory), built now unless the
    cache has them; ToolchainMissing / BuildError else."""
    problem = torch_headers_problem()
    if problem is not None:
        raise B.ToolchainMissing(problem)
    compiler = B.find_compiler("cpu")
    try:
        root = user_cache.ensure_cache_dir()
    except user_cache.CacheDirError as e:
        raise B.BuildError(str(e)) from None
    out = root / f"vx_ops_{namespace}_{cache_key(namespace)}.o"
    if out.exists():
        return out
    try:
        return B.build_cached(out, lambda tmp: compile_command(compiler, namespace, tmp), "cpu")
    except OSError as e:
        raise B.BuildError(user_cache.unusable(root, e)) from None


def build_op_library(kernels: Path, namespace: str = NAMESPACE) -> Path:
    """The operator library over the kernel library `kernels` (which must be in the cache
    directory), built now unless the cache has it; ToolchainMissing / BuildError else."""
    obj = prepare_object(namespace)
    out = kernels.parent / f"{obj.stem}_{kernels.stem}.so"
    if out.exists():
        return out
    compiler = B.find_compiler("cpu")
    try:
        return B.build_cached(out, lambda tmp: link_command(compiler, obj, kernels, tmp), "cpu")
    except OSError as e:
        raise B.BuildError(user_cache.unusable(kernels.parent, e)) from None


def build_host() -> tuple[Path, Path]:
    """The kernel library for this host's CPU and its operator library, built now unless the
    cache has them: what the first call of a cpu op needs (kernels.py loads them then),
    or ahead of time (`python -m vllm_xdsl.backends.cuda.build cpu`).
    ToolchainMissing / BuildError else."""
    from vllm_xdsl.backends.cpu.host import isa_key

    # The operator kernels compile beside the kernel library (neither reads the other until
    # the link): on a fresh cache this waits for the longer build, not the sum.
    with ThreadPoolExecutor(max_workers=1) as pool:
        ops_object = pool.submit(prepare_object)
        kernels = B.build_library("cpu", (isa_key(),))
        ops_object.result()
    return kernels, build_op_library(kernels)


@functools.cache
def load_op_library(kernels: Path, namespace: str = NAMESPACE) -> Path:
    """Build (or fetch) and load the operator library: its kernels are then on the CPU key
    of `namespace`'s ops (defined in Python before or after; the dispatcher joins them)."""
    path = build_op_library(kernels, namespace)
    try:
        torch.ops.load_library(str(path))
        handle = ctypes.CDLL(str(path))  # the same loaded library, for its extern "C" part
    except OSError as e:
        raise L.DeviceUnavailable(f"cannot load {path.name}: {e}") from None
    handle.vx_ops_remember_variant.restype = ctypes.c_int
    handle.vx_ops_remember_variant.argtypes = [
        ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_char_p, ctypes.c_void_p,
        ctypes.c_int64, ctypes.c_int]
    _LOADED.append((handle, set()))
    return path


# The loaded operator libraries, each with the schemes whose variant it has been handed.
_LOADED: list[tuple[ctypes.CDLL, set[QuantScheme]]] = []


def remember_variant(scheme: QuantScheme, code: int, struct: ctypes.Structure,
                     scale_dtype: int) -> None:
    """Hand the launchers' struct of `scheme`'s variant (no zero point: the struct then
    points nowhere) to the loaded operator libraries: their C++ kernels take the next calls
    with the variant's text instead of handing them to the Python kernel, which parsed it.
    `code` is the launchers' scheme code, `scale_dtype` the dtype code of dynamic scales."""
    text = scheme.variant.spelling().encode()
    for handle, seen in _LOADED:
        if scheme not in seen:
            handle.vx_ops_remember_variant(code, int(scheme.dtype == torch.float8_e4m3fnuz),
                                           scheme.group_eps, text, ctypes.addressof(struct),
                                           ctypes.sizeof(struct), scale_dtype)
            seen.add(scheme)
