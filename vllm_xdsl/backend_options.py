"""The options of `torch.compile(model, backend="vllm_xdsl", options={...})`, checked when
the backend is first called, before any import or pass runs.

    inner         "inductor" (default) | "eager"
    passes        list of pass names (default: raise-native, fuse-norm-quant, lower-dispatch)
    priority      VLLM_XDSL_PRIORITY syntax, e.g. "rms_norm=triton,native"
    target        "cuda" | "rocm" | "cpu" (default: from the graph's tensors)
    strict        bool: an internal failure raises instead of falling back
    pass_options  {pass name: {option: value}}, the options of vllm-opt's pass flags, e.g.
                  {"raise-native": {"exact": True}, "lower-dispatch": {"report": True}}

A bad option is the user's error, not an internal failure: it raises `OptionsError` (never
the fall back to the unmodified graph), and what the user sees last is its one line.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch._dynamo.exc import ShortenTraceback

from vllm_xdsl.pipeline_options import DEFAULT_PASSES, TARGETS, PipelineOptions

INNER = ("inductor", "eager")
OPTIONS = ("inner", "passes", "priority", "target", "strict", "pass_options")
# The post-grad pass runs inside Inductor: there is no inner compiler to choose.
POST_GRAD_OPTIONS = tuple(o for o in OPTIONS if o != "inner")
# lower-dispatch's target and priority are the backend's own options (the target also
# picks the default when none is given): one place to set each.
_TOP_LEVEL = {("lower-dispatch", "target"), ("lower-dispatch", "priority")}


class OptionsError(ShortenTraceback, ValueError):
    """A bad backend option, as one line that names the option, the value and what fits.

    Dynamo wraps what a backend raises in BackendCompilerFailed (its message on two lines,
    then a hint to report a bug to PyTorch), except a ShortenTraceback, which it re-raises as
    it is after `remove_dynamo_frames()`: here, every frame of the tracer and of this check."""

    def __init__(self, message: str) -> None:
        super().__init__(message, first_useful_frame=None)
        self.message = message

    def __str__(self) -> str:
        # Dynamo appends its TORCHDYNAMO_VERBOSE hint to args[0]; the line stays the line.
        return self.message

    def remove_dynamo_frames(self) -> OptionsError:
        from torch._dynamo import config

        return self if config.verbose else self.with_traceback(None)


def _choices(values: tuple[str, ...]) -> str:
    return ", ".join(repr(v) for v in values)


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise OptionsError(f"option {name!r} must be one of {_choices(allowed)}, "
                           f"got {value!r}")
    return value


@dataclass(frozen=True)
class BackendOptions:
    inner: str = "inductor"
    pipeline: PipelineOptions = PipelineOptions()
    strict: bool = False

    @staticmethod
    def parse(options: Mapping[str, Any] | None,
              known: tuple[str, ...] = OPTIONS) -> BackendOptions:
        """Validate `torch.compile(..., options=...)`; OptionsError with one clear line.
        `known` is what the caller accepts (the post-grad pass takes all but `inner`): an
        error lists only those."""
        options = dict(options or {})
        for key in options:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise OptionsError(f"unknown option {key!r} (options: "
                                   f"{', '.join(known)}){hint}")
        inner = _one_of("inner", options.get("inner", "inductor"), INNER)
        passes = options.get("passes", DEFAULT_PASSES)
        if isinstance(passes, str) or not isinstance(passes, list | tuple) or not all(
                isinstance(p, str) for p in passes):
            raise OptionsError(f"option 'passes' must be a list of pass names, "
                               f"got {passes!r}")
        _check_passes(passes)
        target = options.get("target")
        if target is not None:
            _one_of("target", target, TARGETS)
        priority = options.get("priority")
        if priority is not None:
            _check_priority(priority)
        strict = options.get("strict", False)
        if not isinstance(strict, bool):
            raise OptionsError(f"option 'strict' must be True or False, got {strict!r}")
        pass_options = _pass_options(options.get("pass_options", {}), tuple(passes))
        return BackendOptions(
            inner, PipelineOptions(tuple(passes), target, priority, pass_options), strict
        )


def _check_passes(passes: list[str] | tuple[str, ...]) -> None:
    from vllm_xdsl.transforms import unknown_pass  # the pass table only: no xDSL

    for name in passes:
        problem = unknown_pass(name)
        if problem is not None:
            raise OptionsError(f"option 'passes': {problem}")


def _check_priority(priority: Any) -> None:
    from vllm_xdsl.ops.policy import DispatchError, check_priority

    if not isinstance(priority, str):
        raise OptionsError(f"option 'priority' must be a string like "
                           f"'rms_norm=triton,native', got {priority!r}")
    try:
        check_priority(priority, "option 'priority'")
    except DispatchError as e:
        raise OptionsError(str(e)) from None


def _pass_options(given: Any, passes: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """{pass: {option: ArgSpec values}}, each checked against its pass's fields."""
    if not isinstance(given, Mapping):
        raise OptionsError(f"option 'pass_options' must be a dict of pass name -> "
                           f"{{option: value}}, got {given!r}")
    if not given:
        return {}  # no pass to import: a cache hit needs no xDSL
    from vllm_xdsl.pass_options import PassOptionError, build_pass, python_params
    from vllm_xdsl.transforms import available_passes, unknown_pass

    available = available_passes()
    checked: dict[str, dict[str, Any]] = {}
    for name, opts in given.items():
        problem = unknown_pass(name)
        if problem is not None:
            raise OptionsError(f"pass_options: {problem}")
        if name not in passes:
            raise OptionsError(f"pass_options: pass {name!r} is not in passes "
                               f"({', '.join(passes)})")
        cls = available[name]()
        try:
            params = python_params(cls, opts)
            for key in params:
                if (name, key) in _TOP_LEVEL:
                    raise PassOptionError(f"pass {name!r}: set {key!r} with the backend "
                                          f"option {key!r}")
            build_pass(cls, params, python=True)
        except PassOptionError as e:
            raise OptionsError(f"pass_options: {e}") from None
        checked[name] = params
    return checked
