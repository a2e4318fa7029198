"""Running the passes on a module: the one place used by the torch.compile backend, the
benchmarks and the demo.

    result = run_pipeline(module, PipelineOptions(passes=("raise-native", "lower-dispatch")))
    result.stages   # op counts after import and after each pass
    result.report   # the dispatch report, if lower-dispatch ran
    result.seconds  # wall seconds per stage (each pass with its verify and op counts,
                    # "verify" when it runs once at the end; the torch.compile backend
                    # adds "import" and "export")

An unknown pass name is a ValueError before any pass runs. With a `Dumper`
(`VLLM_XDSL_DUMP_DIR`), the IR after import and after each pass is written as
`NN-<stage>.mlir` (text that `vllm-opt` parses), plus `dispatch-report.txt`.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

if TYPE_CHECKING:
    from xdsl.context import Context

    from vllm_xdsl.ops import DispatchReport

# The pipeline's options and errors live where importing them costs no xDSL (the backend
# reads them on every compile, a cache hit included); these are their public names.
from vllm_xdsl.pipeline_options import DEFAULT_PASSES as DEFAULT_PASSES
from vllm_xdsl.pipeline_options import DUMP_ENV as DUMP_ENV
from vllm_xdsl.pipeline_options import TARGETS as TARGETS
from vllm_xdsl.pipeline_options import PipelineOptions as PipelineOptions
from vllm_xdsl.pipeline_options import StageError as StageError

logger = logging.getLogger("vllm_xdsl")

@dataclass
class Stage:
    name: str
    op_counts: Counter[str]


@dataclass
class PipelineResult:
    stages: list[Stage] = field(default_factory=list)
    report: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def op_counts(module: ModuleOp) -> Counter[str]:
    """Ops by name; semantic and provider ops by their full name, opaque calls together."""
    counts: Counter[str] = Counter()
    for op in module.walk():
        if op is module or op.name in ("func.func", "func.return"):
            continue
        counts[op.name] += 1
    return counts


def semantic_counts(module: ModuleOp) -> Counter[str]:
    """Only the ops that are not opaque torch calls (vllm and provider ops)."""
    return Counter({k: v for k, v in op_counts(module).items() if not k.startswith("torch.")})


class Dumper:
    """Writes the stages of one compiled graph into `<root>/<NNN>-<name>/`.

    The dump is diagnostics: a directory that cannot be written (a file, no permission,
    disk full) turns dumping off with one warning per root, and the compile goes on.
    """

    _graphs = itertools.count()
    _warned: set[str] = set()

    def __init__(self, root: str | os.PathLike[str], name: str = "graph") -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        self.root = str(root)
        self.dir = Path(root) / f"{next(self._graphs):03d}-{safe}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._stages = itertools.count()
        self.failed = False

    @classmethod
    def from_env(cls, name: str = "graph") -> Dumper | None:
        root = os.environ.get(DUMP_ENV)
        if not root:
            return None
        try:
            return cls(root, name)
        except OSError as e:
            cls._warn(root, e)
            return None

    @classmethod
    def _warn(cls, root: str, error: OSError) -> None:
        if root not in cls._warned:
            cls._warned.add(root)
            logger.warning("vllm_xdsl: %s=%s is not a writable directory (%s); IR dumps are "
                           "off", DUMP_ENV, root, error.strerror or error)

    def module(self, stage: str, module: ModuleOp) -> Path:
        path = self.dir / f"{next(self._stages):02d}-{stage}.mlir"
        self._write(path, str(module) + "\n")
        return path

    def text(self, filename: str, text: str) -> Path:
        path = self.dir / filename
        self._write(path, text if text.endswith("\n") else text + "\n")
        return path

    def _write(self, path: Path, text: str) -> None:
        if self.failed:
            return
        try:
            path.write_text(text)
        except OSError as e:
            self.failed = True
            self._warn(self.root, e)


def make_pass(name: str, options: PipelineOptions) -> ModulePass:
    """An instance of pass `name` with the options it takes; ValueError for an unknown name."""
    from vllm_xdsl.transforms import get_pass

    cls = get_pass(name)
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    kwargs: dict[str, Any] = {}
    if "target" in fields and options.target is not None:
        kwargs["target"] = options.target
    if "priority" in fields and options.priority is not None:
        kwargs["priority"] = options.priority
    params = options.pass_options.get(name)
    if not params:
        return cls(**kwargs)
    from vllm_xdsl.pass_options import build_pass

    return dataclasses.replace(build_pass(cls, params, python=True), **kwargs)


def apply_pass(p: ModulePass, ctx: Context, module: ModuleOp) -> DispatchReport | None:
    """Apply `p` to `module`; the dispatch report it returns if it is lower-dispatch."""
    from vllm_xdsl.transforms.lowering.lower_dispatch import LowerDispatchPass

    if isinstance(p, LowerDispatchPass):
        return p.lower(ctx, module)
    p.apply(ctx, module)
    return None


def dispatch_report(report: DispatchReport | None, module: ModuleOp) -> str:
    """The text of `report`, else (a pass registered as lower-dispatch that returns none) a
    summary of the semantic and provider ops in the module."""
    if report is not None:
        return report.format()
    lines = []
    for op in module.walk():
        if _is_semantic(op):
            lines.append(f"{op.name}")
    counts = Counter(lines)
    return "\n".join(f"{name}: {n}" for name, n in sorted(counts.items())) or "(no semantic ops)"


def _is_semantic(op: Operation) -> bool:
    from vllm_xdsl.dialects.vllm import SemanticSignature

    return isinstance(op, SemanticSignature)


def run_pipeline(
    module: ModuleOp, options: PipelineOptions | None = None, dumper: Dumper | None = None
) -> PipelineResult:
    """Run the passes of `options` on `module` in place; StageError names a failing pass."""
    from vllm_xdsl.dialects import make_context

    options = options or PipelineOptions()
    if options.target is not None:
        if options.target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {options.target!r}")
        module.attributes["vllm.target"] = StringAttr(options.target)
    result = PipelineResult()
    result.stages.append(Stage("import", op_counts(module)))
    if dumper:
        dumper.module("import", module)
    built = [(name, make_pass(name, options)) for name in options.passes]  # all, then run
    ctx = make_context()
    for name, p in built:
        start = time.perf_counter()
        try:
            report = apply_pass(p, ctx, module)
            if options.verify_each:
                module.verify()
        except Exception as e:
            if dumper:
                dumper.module(f"{name}-FAILED", module)
            raise StageError(f"pass {name}", e) from e
        result.stages.append(Stage(name, op_counts(module)))
        result.seconds[name] = time.perf_counter() - start
        if dumper:
            dumper.module(name, module)
        if name == "lower-dispatch":
            result.report = dispatch_report(report, module)
            if dumper:
                dumper.text("dispatch-report.txt", result.report)
    if not options.verify_each:
        start = time.perf_counter()
        try:
            module.verify()
        except Exception as e:
            if dumper:
                dumper.module("verify-FAILED", module)
            raise StageError("verify after the passes", e) from e
        result.seconds["verify"] = time.perf_counter() - start
    logger.debug("pipeline ran %s", [s.name for s in result.stages])
    return result
