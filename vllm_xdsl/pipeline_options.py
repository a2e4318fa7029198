"""The pipeline's options and its error, without xDSL: the torch.compile backend reads them
on every compile, also when torch's caches serve the graph and no pass runs
(vllm_xdsl.pipeline runs the passes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_PASSES: tuple[str, ...] = ("raise-native", "fuse-norm-quant", "lower-dispatch")
TARGETS = ("cuda", "rocm", "cpu")
DUMP_ENV = "VLLM_XDSL_DUMP_DIR"


class StageError(Exception):
    """A pipeline stage failed; `stage` names it (import, pass <name>, export, ...)."""

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(f"{stage}: {type(cause).__name__}: {cause}")
        self.stage = stage
        self.cause = cause


@dataclass(frozen=True)
class PipelineOptions:
    passes: tuple[str, ...] = DEFAULT_PASSES
    target: str | None = None  # default dispatch target (module attribute vllm.target)
    priority: str | None = None  # VLLM_XDSL_PRIORITY syntax, for lower-dispatch
    # Per pass, its options as xDSL's pipeline parser gives them: {"raise-native":
    # {"exact": (True,)}} (vllm_xdsl.pass_options checks them against the pass's fields).
    pass_options: dict[str, dict[str, tuple[Any, ...]]] = field(default_factory=dict)
    # Verify the module after every pass, so that a failure names the pass that broke it.
    # Off: once, after the last pass (a third of the cost at 32 layers); the torch.compile
    # backend runs it so and replays a failure with it on (compile.transform).
    verify_each: bool = True
