"""`vllm-opt -t triton`: print the Triton kernels a module's `triton` ops compile to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from vllm_xdsl.backends.triton.from_ir import emit_module_source


@dataclass(frozen=True)
class TritonSourceTarget(Target):
    name: ClassVar[str] = "triton"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(emit_module_source(module))
