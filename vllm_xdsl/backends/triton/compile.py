"""Compile emitted sources: exec each spec's source once and cache its jitted kernels.

Triton reads a kernel's source back through `inspect` (to hash and parse it, also in the
interpreter), so each source is registered in `linecache` under a unique pseudo-file name
and executed as its own module.
"""

from __future__ import annotations

import hashlib
import linecache
import sys
import types
from functools import cache
from typing import Any

from vllm_xdsl.backends.triton.emit import emit_kernels, emit_source
from vllm_xdsl.backends.triton.spec import KernelSpec


class TritonUnavailableError(RuntimeError):
    """Triton is not installed (it is the optional `triton` extra)."""


def triton_problem() -> str | None:
    """Why Triton kernels cannot be compiled here, or None."""
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return f"triton is not importable ({type(e).__name__}: {e})"
    return None


@cache
def get_module(spec: KernelSpec) -> types.ModuleType:
    """The executed module of `spec`'s source (cached per spec)."""
    problem = triton_problem()
    if problem is not None:
        raise TritonUnavailableError(problem)
    source = emit_source(spec)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return exec_source(source, f"vllm_xdsl_triton_gen.{spec.name}_{digest}")


def exec_source(source: str, mod_name: str) -> types.ModuleType:
    """Execute kernel source as module `mod_name`, readable by Triton through `inspect`."""
    filename = f"<{mod_name}>"
    # mtime None: linecache.checkcache never evicts this entry.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(mod_name)
    module.__file__ = filename
    sys.modules[mod_name] = module  # Triton looks kernels up by module name
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


@cache
def get_kernels(spec: KernelSpec) -> tuple[Any, ...]:
    """All jitted kernels of `spec`, in launch order (cached: launches look them up)."""
    module = get_module(spec)
    return tuple(getattr(module, name) for name in emit_kernels(spec))


def get_kernel(spec: KernelSpec) -> Any:
    """The jitted kernel of `spec` (for two-kernel ops, the one that writes the output)."""
    return get_kernels(spec)[-1]
