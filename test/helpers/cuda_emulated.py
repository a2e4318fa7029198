"""The CUDA/HIP kernels as the tests run them: built with g++ against csrc/emul.h (warp32,
warp64), or on a GPU where torch sees one, with CPU tensors in and out."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from vllm_xdsl.backends.cuda import library as L
from vllm_xdsl.backends.cuda.kernels import Kernels

GPU = torch.cuda.is_available()
KERNEL_BUILDS = ["warp32", "warp64", *(["gpu"] if GPU else [])]
"""The params of a `kernels` fixture: the two emulation builds, and the GPU if there is one."""


def require_cxx() -> None:
    """Skip without g++ (fail where VLLM_XDSL_REQUIRE_TOOLCHAINS=1 says it must be there)."""
    if shutil.which(os.environ.get("VLLM_XDSL_CXX", "g++")) is None:
        if os.environ.get("VLLM_XDSL_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail("VLLM_XDSL_REQUIRE_TOOLCHAINS=1 but g++ (the emulation build) is missing")
        pytest.skip("g++ is not installed")


class OnDevice:
    """Kernels called with CPU tensors, run on `device`; results (and in-place writes) come back."""

    def __init__(self, kernels: Kernels, device: str) -> None:
        self.kernels, self.device = kernels, device

    def __getattr__(self, name: str):  # noqa: ANN204
        fn = getattr(self.kernels, name)

        def call(*args: object, **kwargs: object) -> object:
            moved = [a.to(self.device) if isinstance(a, torch.Tensor) else a for a in args]
            kwargs = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v
                      for k, v in kwargs.items()}
            out = fn(*moved, **kwargs)
            back = {}
            for a, m in zip(args, moved, strict=True):
                if isinstance(a, torch.Tensor):
                    a.copy_(m.cpu())  # what an in-place kernel wrote
                    back[id(m)] = a
            if isinstance(out, tuple):
                return tuple(back.get(id(o), o.cpu()) for o in out)
            return back.get(id(out), out.cpu())

        return call


def build_kernels(build: str, tmp_path_factory: pytest.TempPathFactory) -> Kernels:
    """The kernels of one of KERNEL_BUILDS; an emulation build compiles into a fresh cache."""
    if build == "gpu":
        return OnDevice(Kernels("rocm" if torch.version.hip else "cuda"), "cuda")  # type: ignore[return-value]
    require_cxx()
    with pytest.MonkeyPatch.context() as mp:  # a fresh cache: this session compiles
        mp.setenv("VLLM_XDSL_CACHE_DIR", str(tmp_path_factory.mktemp("vx_emul_cache")))
        return Kernels("cuda", L.load_library("emul", (build,)))
