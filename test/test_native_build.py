"""The JIT build: nvcc (sm_80 + sm_90) and hipcc (gfx90a + gfx940) compile every kernel, the
libraries load and export every launcher, a call without a device is a clear error, and the
cache (hit, key, concurrent builders, missing compiler, timeout, compile error) behaves.

Compiling takes ~15 s per library, so each is built once per session into a fresh cache.
With VLLM_XDSL_REQUIRE_TOOLCHAINS=1 (CI) a missing nvcc / hipcc fails instead of skipping.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vllm_xdsl.backends.cuda import build as B
from vllm_xdsl.backends.cuda import library as L

LAUNCHERS = {*L.SIGNATURES, "vx_last_error"}
BUILD_SECONDS: dict[str, float] = {}


def require(vendor: B.Vendor) -> str:
    """The compiler of `vendor`; skip (or fail in CI) when it is missing."""
    try:
        return B.find_compiler(vendor)
    except B.ToolchainMissing as e:
        if os.environ.get("VLLM_XDSL_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"VLLM_XDSL_REQUIRE_TOOLCHAINS=1 but {e}")
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vx_build_cache")


@pytest.fixture
def cache(session_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VLLM_XDSL_CACHE_DIR", str(session_cache))
    return session_cache


def _build_once(vendor: B.Vendor, cache_dir: Path) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VLLM_XDSL_CACHE_DIR", str(cache_dir))
        start = time.monotonic()
        path = B.build_library(vendor, B.CI_ARCHS[vendor])
        BUILD_SECONDS[vendor] = time.monotonic() - start
        print(f"\n{vendor} library {B.CI_ARCHS[vendor]} built in {BUILD_SECONDS[vendor]:.1f} s")
    return path


@pytest.fixture(scope="session")
def cuda_lib(session_cache: Path) -> Path:
    require("cuda")
    return _build_once("cuda", session_cache)


@pytest.fixture(scope="session")
def rocm_lib(session_cache: Path) -> Path:
    require("rocm")
    return _build_once("rocm", session_cache)


# --- the real toolchains -----------------------------------------------------------------


def test_nvcc_builds_sm80_sm90(cuda_lib: Path) -> None:
    assert LAUNCHERS <= L.exported_symbols(cuda_lib)
    blob = cuda_lib.read_bytes()
    for arch in (b"sm_80", b"sm_90"):
        assert arch in blob, f"no {arch.decode()} code in {cuda_lib.name}"


def test_hipcc_builds_gfx90a_gfx940(rocm_lib: Path) -> None:
    assert LAUNCHERS <= L.exported_symbols(rocm_lib)
    blob = rocm_lib.read_bytes()
    for arch in (b"gfx90a", b"gfx940"):
        assert b"amdgcn-amd-amdhsa--" + arch in blob, f"no {arch.decode()} code object"


@pytest.mark.parametrize("vendor", ["cuda", "rocm"])
def test_loads_and_reports_missing_device(vendor: B.Vendor, request: pytest.FixtureRequest) -> None:
    path = request.getfixturevalue(f"{vendor}_lib")
    lib = L.KernelLibrary(path, vendor)  # the CUDA runtime is linked statically: loads without a driver
    problem = lib.device_problem()
    runtime = "CUDA" if vendor == "cuda" else "HIP"
    if problem is None:
        pytest.skip(f"a {runtime} device is present; this checks the no-device error")
    assert problem.startswith(f"no usable {runtime} device:") and "\n" not in problem
    # A launcher checks the device before touching its (here bogus) pointers: no crash.
    with pytest.raises(L.DeviceUnavailable, match=rf"^vllm_xdsl_{vendor}::rms_norm: no usable {runtime} device"):
        lib.call("vx_rms_norm", None, None, None, 4, 64, 64, 64, 1e-6, 1, 1, None, op="rms_norm")


def test_second_build_is_cache_hit(cuda_lib: Path, rocm_lib: Path, cache: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def no_compile(*args: object) -> None:
        raise AssertionError("the compiler ran on a cache hit")

    monkeypatch.setattr(B, "_run_compiler", no_compile)
    assert B.build_library("cuda", B.CI_ARCHS["cuda"]) == cuda_lib
    assert B.build_library("rocm", B.CI_ARCHS["rocm"]) == rocm_lib


def test_unsupported_arch_is_one_line_build_error(cache: Path) -> None:
    require("rocm")
    with pytest.raises(B.BuildError) as info:
        B.build_library("rocm", ("gfx9999",))
    msg = str(info.value)
    assert "\n" not in msg and "gfx9999" in msg and "full log:" in msg


# --- the cache mechanics (with g++ and the CPU emulation build: same code path, fast) ----


def _sources(tmp_path: Path) -> Path:
    src = tmp_path / "csrc"
    shutil.copytree(B.CSRC, src)
    return src


def test_key_changes_with_source_and_archs(tmp_path: Path) -> None:
    require("emul")
    src = _sources(tmp_path)
    key = B.cache_key("emul", ("warp32",), src)
    assert key == B.cache_key("emul", ("warp32",), src)
    assert key != B.cache_key("emul", ("warp64",), src)
    with open(src / "kernels.cuh", "a") as f:
        f.write("\n// an edit\n")
    assert B.cache_key("emul", ("warp32",), src) != key


_COUNTING_CXX = """\
#!{python}
import os, subprocess, sys, time
if sys.argv[1:] == ["--version"]:
    sys.exit(subprocess.call(["g++", "--version"]))
with open({log!r}, "a") as f:
    f.write("compile\\n")
time.sleep(1.0)  # hold the lock while the other builders arrive
sys.exit(subprocess.call(["g++", *sys.argv[1:]]))
"""

_BUILDER = """\
import sys
from pathlib import Path
from vllm_xdsl.backends.cuda.build import build_library
print(build_library("emul", ("warp32",), Path(sys.argv[1])))
"""


def test_concurrent_builders_make_one_valid_library(tmp_path: Path) -> None:
    require("emul")
    src = _sources(tmp_path)
    log = tmp_path / "invocations"
    cxx = tmp_path / "counting-g++"
    cxx.write_text(_COUNTING_CXX.format(python=sys.executable, log=str(log)))
    cxx.chmod(0o755)
    cache_dir = tmp_path / "cache"
    env = {**os.environ, "VLLM_XDSL_CACHE_DIR": str(cache_dir), "VLLM_XDSL_CXX": str(cxx)}
    procs = [subprocess.Popen([sys.executable, "-c", _BUILDER, str(src)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    paths = {out.strip() for out, _ in outs}
    assert len(paths) == 1
    assert log.read_text().count("compile") == 1  # the others waited and reused it
    libs = list(cache_dir.glob("*.so"))
    assert [str(p) for p in libs] == list(paths)
    assert not list(cache_dir.glob(".*tmp"))  # no partial file left behind
    assert LAUNCHERS <= L.exported_symbols(libs[0])
    ctypes.CDLL(str(libs[0]))


def test_missing_compiler_is_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_XDSL_NVCC", "/nonexistent/nvcc")
    with pytest.raises(B.ToolchainMissing, match=r"^VLLM_XDSL_NVCC=/nonexistent/nvcc is not an executable compiler$"):
        B.build_library("cuda")
    monkeypatch.delenv("VLLM_XDSL_NVCC")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(B.ToolchainMissing, match=r"^nvcc not found .*cannot be built$"):
        B.build_library("cuda")


def test_hanging_compiler_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cxx = tmp_path / "slow-g++"
    cxx.write_text("#!/bin/sh\ncase \"$1\" in --version) echo slow 1.0;; *) sleep 120;; esac\n")
    cxx.chmod(0o755)
    monkeypatch.setenv("VLLM_XDSL_CXX", str(cxx))
    monkeypatch.setenv("VLLM_XDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(B, "COMPILE_TIMEOUT_S", 1.0)
    start = time.monotonic()
    with pytest.raises(B.BuildError, match=r"timed out after 1 s$"):
        B.build_library("emul", ("warp32",), _sources(tmp_path))
    assert time.monotonic() - start < 60  # about 1 s; a missed timeout takes 120
    assert not list((tmp_path / "cache").glob("*.so"))


def test_compile_error_is_one_line_with_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require("emul")
    src = _sources(tmp_path)
    (src / "vx_kernels.cu").write_text(textwrap.dedent("""\
        int broken( {
    """))
    monkeypatch.setenv("VLLM_XDSL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(B.BuildError) as info:
        B.build_library("emul", ("warp32",), src)
    msg = str(info.value)
    assert "\n" not in msg and "error" in msg
    log = Path(msg.rsplit("full log: ", 1)[1])
    assert "vx_kernels.cu" in log.read_text()


def test_cache_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VLLM_XDSL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert B.cache_dir() == tmp_path / "xdg" / "vllm_xdsl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert B.cache_dir() == Path.home() / ".cache" / "vllm_xdsl"
    monkeypatch.setenv("VLLM_XDSL_CACHE_DIR", str(tmp_path / "mine"))
    assert B.cache_dir() == tmp_path / "mine"


def test_required_toolchain_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("VLLM_XDSL_NVCC", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("VLLM_XDSL_REQUIRE_TOOLCHAINS", "1")
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_TOOLCHAINS=1 but nvcc not found"):
        require("cuda")
    monkeypatch.delenv("VLLM_XDSL_REQUIRE_TOOLCHAINS")
    with pytest.raises(pytest.skip.Exception, match="nvcc not found"):
        require("cuda")
