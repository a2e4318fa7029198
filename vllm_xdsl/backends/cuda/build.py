"""Just-in-time build of the CUDA / HIP kernel library (shared by the cuda and rocm backends).

The kernels are compiled on first use, never at pip install, into a user cache directory
(`VLLM_XDSL_CACHE_DIR`, else `$XDG_CACHE_HOME/vllm_xdsl`, else `~/.cache/vllm_xdsl`). The
artifact name carries a key over the sources, the compiler's version, the target archs and
the flags, so a change to any of them rebuilds. Concurrent builders (several processes or
ranks) serialize on an `fcntl` lock; the compiler writes a temporary file that is renamed
into place atomically, so a reader never sees a partial library.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from vllm_xdsl import user_cache

# "emul": the same sources built with g++ against csrc/emul.h (a CPU emulation of the GPU
# runtime) so that tests can run the kernels' numerics without a GPU; archs = ("warp32",).
# "cpu": the same launchers, numerics and variants with row kernels for the host's vector
# units (backends/cpu/csrc/vx_cpu.cpp, including this csrc); archs = (the host's ISA key,).
Vendor = Literal["cuda", "rocm", "emul", "cpu"]

CSRC = Path(__file__).parent / "csrc"
CPU_CSRC = Path(__file__).parents[1] / "cpu" / "csrc"
MAIN_SOURCE = "vx_kernels.cu"
MAIN_SOURCES: dict[str, str] = {"cpu": "vx_cpu.cpp"}
# Sources that make up the library (the host-side numerics check is built separately).
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".cpp")

DEFAULT_ARCHS: dict[str, tuple[str, ...]] = {
    "cuda": ("sm_80", "sm_90"), "rocm": ("gfx90a",), "emul": ("warp32",), "cpu": ("native",),
}
# What this project's CI toolchains build. Debian's hipcc (ROCm 5.2, clang 15) knows gfx940
# but not gfx942 (MI300X) or gfx950; a gfx940 code object does not load on a gfx942.
CI_ARCHS: dict[str, tuple[str, ...]] = {
    "cuda": ("sm_80", "sm_90"), "rocm": ("gfx90a", "gfx940"), "emul": ("warp32",),
}

_COMPILER = {
    "cuda": ("nvcc", "VLLM_XDSL_NVCC", "CUDA_HOME"),
    "rocm": ("hipcc", "VLLM_XDSL_HIPCC", "ROCM_PATH"),
    "emul": ("g++", "VLLM_XDSL_CXX", "CXX_HOME"),
    "cpu": ("g++", "VLLM_XDSL_CXX", "CXX_HOME"),
}
VERSION_TIMEOUT_S = 60.0
COMPILE_TIMEOUT_S = float(os.environ.get("VLLM_XDSL_COMPILE_TIMEOUT", "900"))


class ToolchainMissing(RuntimeError):
    """The compiler for a backend is not installed (or not runnable)."""


class BuildError(RuntimeError):
    """The compiler ran but did not produce the library (or timed out)."""


def cache_dir() -> Path:
    return user_cache.cache_dir()


def find_compiler(vendor: Vendor) -> str:
    """Path of nvcc / hipcc: $VLLM_XDSL_NVCC|HIPCC, then PATH, then $CUDA_HOME|ROCM_PATH/bin."""
    name, override, home = _COMPILER[vendor]
    if os.environ.get(override):
        path = os.environ[override]
        if shutil.which(path) is None:
            raise ToolchainMissing(f"{override}={path} is not an executable compiler")
        return path
    found = shutil.which(name)
    if found is None and os.environ.get(home):
        found = shutil.which(str(Path(os.environ[home]) / "bin" / name))
    if found is None:
        raise ToolchainMissing(
            f"{name} not found (PATH, ${home}/bin); the {vendor} kernels cannot be built"
        )
    return found


def compiler_env(vendor: Vendor) -> dict[str, str]:
    env = dict(os.environ)
    if vendor == "rocm":
        env["HIP_PLATFORM"] = "amd"  # else hipcc picks nvcc when both are installed
    return env


@functools.cache
def _version_of(compiler: str, vendor: Vendor) -> str:
    try:
        res = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True,
            timeout=VERSION_TIMEOUT_S, env=compiler_env(vendor), check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainMissing(f"{compiler} --version failed: {e}") from None
    if res.returncode != 0:
        raise ToolchainMissing(f"{compiler} --version exited with {res.returncode}")
    return res.stdout.strip()


def compiler_version(vendor: Vendor) -> str:
    return _version_of(find_compiler(vendor), vendor)


def compile_command(vendor: Vendor, compiler: str, archs: Sequence[str], src: Path, out: Path) -> list[str]:
    if vendor == "cuda":
        gencode: list[str] = []
        for arch in archs:
            num = arch.removeprefix("sm_")
            gencode += ["-gencode", f"arch=compute_{num},code=sm_{num}"]
        return [compiler, "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC",
                "--threads", str(max(1, min(len(archs), os.cpu_count() or 1))),
                *gencode, "-I", str(src.parent), str(src), "-o", str(out)]
    if vendor == "emul":
        (warp,) = archs
        return [compiler, "-std=c++20", "-O1", "-DVX_EMUL", f"-DVX_EMUL_WARP={warp.removeprefix('warp')}",
                "-shared", "-fPIC", "-I", str(src.parent), "-x", "c++", str(src), "-o", str(out),
                "-lpthread"]
    if vendor == "cpu":
        # -march=native: the archs name the host's ISA (part of the cache key); -fopenmp
        # links libgomp, which torch bundles and loads first, so torch's thread count holds.
        return [compiler, "-std=c++20", "-O3", "-march=native", "-fopenmp", "-DVX_EMUL",
                "-shared", "-fPIC", "-I", str(CSRC), "-I", str(src.parent), str(src),
                "-o", str(out)]
    offload = [f"--offload-arch={arch}" for arch in archs]
    return [compiler, "-std=c++17", "-O3", "-shared", "-fPIC", *offload,
            "-I", str(src.parent), "-x", "hip", str(src), "-o", str(out)]


def source_files(sources: Path) -> list[Path]:
    return sorted(p for p in sources.iterdir() if p.suffix in SOURCE_SUFFIXES)


def cache_key(vendor: Vendor, archs: Sequence[str], sources: Path = CSRC) -> str:
    """Hash of the sources, compiler version, archs and command line."""
    h = hashlib.sha256()
    dirs = [sources, CSRC] if vendor == "cpu" else [sources]  # cpu's source includes CSRC
    for path in (p for d in dirs for p in source_files(d)):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(compiler_version(vendor).encode())
    cmd = compile_command(vendor, "CC", archs, Path("SRC"), Path("OUT"))
    h.update("\0".join([vendor, *archs, *cmd]).encode())
    return h.hexdigest()[:20]


def _run_compiler(cmd: list[str], vendor: Vendor, log: Path) -> None:
    """Run one compile (tests replace this to count compiler invocations)."""
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                             env=compiler_env(vendor), check=False)
    except subprocess.TimeoutExpired:
        raise BuildError(f"{cmd[0]} timed out after {COMPILE_TIMEOUT_S:.0f} s") from None
    except OSError as e:
        raise ToolchainMissing(f"cannot run {cmd[0]}: {e}") from None
    log.write_text(" ".join(cmd) + "\n" + res.stdout + res.stderr)
    if res.returncode != 0:
        first = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr.strip()[:200])
        raise BuildError(f"{Path(cmd[0]).name} failed ({first.strip()}); full log: {log}")


def default_sources(vendor: Vendor) -> Path:
    return CPU_CSRC if vendor == "cpu" else CSRC


def build_library(vendor: Vendor, archs: Sequence[str] | None = None,
                  sources: Path | None = None) -> Path:
    """The compiled kernel library for `archs`, built now unless the cache already has it."""
    archs = tuple(archs or DEFAULT_ARCHS[vendor])
    sources = default_sources(vendor) if sources is None else sources
    compiler = find_compiler(vendor)
    key = cache_key(vendor, archs, sources)
    try:
        root = user_cache.ensure_cache_dir()
    except user_cache.CacheDirError as e:
        raise BuildError(str(e)) from None
    out = root / f"vx_{vendor}_{'-'.join(archs)}_{key}.so"
    if out.exists():
        return out
    try:
        return _build_locked(vendor, compiler, archs, sources, out)
    except OSError as e:  # the lock, the log or the library could not be written
        raise BuildError(user_cache.unusable(root, e)) from None


def _build_locked(vendor: Vendor, compiler: str, archs: tuple[str, ...], sources: Path,
                  out: Path) -> Path:
    main = sources / MAIN_SOURCES.get(vendor, MAIN_SOURCE)
    return build_cached(out, lambda tmp: compile_command(vendor, compiler, archs, main, tmp),
                        vendor)


def build_cached(out: Path, command: Callable[[Path], list[str]], vendor: Vendor) -> Path:
    """Run `command(tmp)` under the build lock of `out` and move tmp to `out` (unless
    another process built it meanwhile); out's directory must exist."""
    root = out.parent
    with open(root / f"{out.name}.lock", "w") as lock:
        _acquire(lock, out)
        try:
            if out.exists():  # another process built it while we waited
                return out
            tmp = root / f".{out.name}.{os.getpid()}.tmp"
            try:
                cmd = command(tmp)
                _run_compiler(cmd, vendor, root / f"{out.name}.log")
                if not tmp.exists():
                    raise BuildError(f"{Path(cmd[0]).name} reported success but wrote no {tmp.name}")
                os.replace(tmp, out)
            finally:
                tmp.unlink(missing_ok=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return out


def _acquire(lock, out: Path) -> None:  # noqa: ANN001 - a text file object
    """Take the build lock, waiting at most one compile timeout (never forever)."""
    deadline = time.monotonic() + COMPILE_TIMEOUT_S + 60.0
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise BuildError(f"timed out waiting for another build of {out.name}") from None
            time.sleep(0.1)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m vllm_xdsl.backends.cuda.build cuda sm_90`: fill the cache ahead of time
    (e.g. in a container image), printing each library's path and the compile time. `cpu`
    builds what the cpu provider's first call would: the kernel library for this host's
    instruction sets and its torch operator kernels."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m vllm_xdsl.backends.cuda.build")
    parser.add_argument("vendor", choices=("cuda", "rocm", "emul", "cpu"))
    parser.add_argument("archs", nargs="*", help="e.g. sm_80 sm_90, gfx90a (default: CI's set; "
                        "none for cpu, built for this host's CPU)")
    ns = parser.parse_args(argv)
    if ns.vendor == "cpu" and ns.archs:
        parser.error("cpu takes no archs: its kernels are built for this host's CPU "
                     "(-march=native)")
    start = time.monotonic()
    paths: tuple[Path, ...]
    try:
        if ns.vendor == "cpu":
            from vllm_xdsl.backends.cpu.host import host_problem
            from vllm_xdsl.backends.cpu.op_library import build_host

            problem = host_problem()  # a CPU without AVX2 would fail in the compiler
            if problem is not None:
                raise ToolchainMissing(problem)
            paths = build_host()
        else:
            paths = (build_library(ns.vendor, ns.archs or CI_ARCHS[ns.vendor]),)
    except (ToolchainMissing, BuildError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("\n".join(map(str, paths)) + f" ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
