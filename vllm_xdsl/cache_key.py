"""What our compilation of a graph depends on, for torch's compile caches.

Plain Inductor's second process loads its compiled graphs from AOTAutograd's cache and
skips tracing and code generation. That cache keys on the Dynamo graph and on
Inductor's configuration, not on the forward compiler: two backends compiling one graph
differently would share entries. Inductor's configuration includes the `uuid()` of its
custom graph passes, which is how a pass tells the caches what it does; `keyed_config`
installs one that carries our identity (this package's source, the backend's options, our
environment variables, `ops.set_priority`, the registered providers, the autotuning
results) and, around it,
any such pass the user had installed, so that an entry is reused only where our pipeline
would produce the very same graph.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

_PACKAGE = Path(__file__).resolve().parent
_SOURCES = (".py", ".cu", ".cuh", ".h", ".c", ".cpp", ".mlir")
# Other environment variables our passes, kernels or providers read.
_OTHER_ENV = ("TRITON_INTERPRET",)


@lru_cache(maxsize=1)
def source_hash() -> str:
    """The hash of every source file of this package (code, kernels, headers)."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")):
        if path.suffix in _SOURCES and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(_PACKAGE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _registered_impls() -> list[str]:
    from vllm_xdsl.ops import registry

    return sorted(f"{impl.op}:{impl.provider}:{getattr(impl.fn, '__module__', '?')}."
                  f"{getattr(impl.fn, '__qualname__', repr(impl.fn))}"
                  for impl in registry.implementations())


def _tuning_results() -> str:
    from vllm_xdsl.tune.cache import cache_path

    with contextlib.suppress(OSError):
        return hashlib.sha256(cache_path().read_bytes()).hexdigest()
    return "none"


def pipeline_identity(options: Any) -> str:
    """A hash of everything our compilation of one graph depends on besides the graph and
    torch's own configuration (which the caches key on already)."""
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith("VLLM_XDSL_") or k in _OTHER_ENV)
    from vllm_xdsl.ops.policy import STATE

    parts = [source_hash(), repr(options), repr(env), repr(STATE.explicit),
             repr(_registered_impls()), _tuning_results()]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class PipelineKey(CustomGraphPass):
    """Not a rewrite: carries our identity into the caches' keys as a custom pass's uuid,
    and runs the pass the user had installed in its place, if any."""

    def __init__(self, identity: str, user_pass: CustomGraphPass | None) -> None:
        self.identity = identity
        self.user_pass = user_pass

    def __call__(self, graph: torch.fx.graph.Graph) -> None:
        if self.user_pass is not None:
            self.user_pass(graph)

    def uuid(self) -> Any:
        user = self.user_pass.uuid() if self.user_pass is not None else ""
        return None if user is None else ("vllm_xdsl", self.identity, user)


@contextlib.contextmanager
def keyed_config(options: Any) -> Iterator[bool]:
    """Inductor's configuration with our PipelineKey as `post_grad_custom_pre_pass`; yields
    whether the compiled graphs may be cached (False: the user's pass there is a plain
    callable, which Inductor cannot key on, so its caches are bypassed as without us)."""
    from torch._inductor import config

    user_pass = config.post_grad_custom_pre_pass
    if user_pass is not None and not isinstance(user_pass, CustomGraphPass):
        yield False
        return
    key = PipelineKey(pipeline_identity(options), user_pass)
    with config.patch(post_grad_custom_pre_pass=key):
        yield True
