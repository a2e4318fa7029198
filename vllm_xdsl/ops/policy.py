"""Priority policy: which provider runs each op, shared by eager dispatch and lower-dispatch.

Syntax: `"rms_norm=triton,native;silu_and_mul=cuda"`, or a bare list `"triton,native"` for
every op (both may be mixed: the bare list covers ops without their own entry). `p!` forces
a provider: if it cannot run, that is an error, not a fallback. `auto` is reserved for
autotuning. `native` closes every list.

Sources, highest first: explicit (a pass option / `priority=` argument, then
`set_priority`), the environment `VLLM_XDSL_PRIORITY`, the platform default of the target.
For each op the first source that names it (or has a bare list) decides.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from vllm_xdsl.ops import registry

ENV_VAR = "VLLM_XDSL_PRIORITY"
AUTO = "auto"
PLATFORM_DEFAULTS: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda", "triton", "native"),
    "rocm": ("rocm", "triton", "native"),
    # The host build of the kernels (provider `cpu`) is opt-in, by priority or `auto`: its
    # kernels beat Inductor's code for the natives (bench/RESULTS.md), but a first use
    # builds them (about 17 s), a whole model gains nothing measurable where the GEMMs take
    # 97-99 % of a step, and f32 models would no longer equal eager torch bit for bit
    # (bench/RESULTS.md, "Target cpu's default priority, tried").
    "cpu": ("native",),
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*!?\Z")


class DispatchError(Exception):
    """No implementation may run an op under the given policy (names op, impl, reason)."""


@dataclass(frozen=True)
class Choice:
    provider: str
    forced: bool = False

    def __str__(self) -> str:
        return self.provider + ("!" if self.forced else "")


@dataclass(frozen=True)
class Priority:
    """A parsed priority string: per-op provider lists and an optional list for every op."""

    text: str
    per_op: tuple[tuple[str, tuple[Choice, ...]], ...]
    default: tuple[Choice, ...] | None

    def for_op(self, op: str) -> tuple[Choice, ...] | None:
        for name, choices in self.per_op:
            if name == op:
                return choices
        return self.default


def _parse_list(text: str, where: str) -> tuple[Choice, ...]:
    choices: list[Choice] = []
    for item in text.split(","):
        item = item.strip()
        if not _NAME.match(item):
            raise DispatchError(f"bad priority {where}: {item!r} is not a provider name")
        c = Choice(item.rstrip("!"), item.endswith("!"))
        if any(prev.provider == c.provider for prev in choices):
            raise DispatchError(f"bad priority {where}: provider {c.provider!r} listed twice")
        choices.append(c)
    return tuple(choices)


@lru_cache(maxsize=256)
def parse_priority(text: str) -> Priority:
    """Parse a priority string; DispatchError on bad syntax or an unknown op name."""
    known = registry.all_ops()
    per_op: dict[str, tuple[Choice, ...]] = {}
    default: tuple[Choice, ...] | None = None
    for segment in text.split(";"):
        segment = segment.strip()
        if not segment:
            continue
        if "=" in segment:
            op, _, rest = segment.partition("=")
            op = op.strip()
            if op not in known:
                raise DispatchError(f"bad priority {text!r}: unknown op {op!r}")
            if op in per_op:
                raise DispatchError(f"bad priority {text!r}: op {op!r} listed twice")
            per_op[op] = _parse_list(rest, f"{text!r} for {op}")
        elif default is not None:
            raise DispatchError(f"bad priority {text!r}: more than one list for every op")
        else:
            default = _parse_list(segment, repr(text))
    return Priority(text, tuple(per_op.items()), default)


def check_priority(text: str, source: str) -> Priority:
    """`text` parsed, every provider it names known; DispatchError `<source>: ...` naming
    the known providers otherwise. Options (torch.compile's `priority`, lower-dispatch's
    `priority`, VLLM_XDSL_PRIORITY) are checked so before any op is dispatched: `select`
    would find an unknown provider only at the first op whose list reaches it."""
    try:
        parsed = parse_priority(text)
    except DispatchError as e:
        raise DispatchError(f"{source}: {e}") from None
    lists = [choices for _, choices in parsed.per_op] + [parsed.default or ()]
    for choice in (c for choices in lists for c in choices):
        # native and auto are known without loading the providers.
        if choice.provider not in ("native", AUTO) and not registry.is_known_provider(
                choice.provider):
            known = sorted(registry.registered_providers() | set(registry.BUILTIN_PROVIDERS))
            raise DispatchError(f"{source}: unknown provider {choice.provider!r} "
                                f"(known: {', '.join([*known, AUTO])})")
    return parsed


def _as_priority(p: str | Priority | None) -> Priority | None:
    return parse_priority(p) if isinstance(p, str) else p


# --- explicit (Python API) and environment sources --------------------------------------


class _State:
    """Process-wide sources. `token` changes identity whenever a source changes, so eager
    caches can key on it cheaply."""

    explicit: Priority | None = None
    env_text: str | None = None
    env: Priority | None = None
    token: object = object()


STATE = _State()


def _bump() -> None:
    # A fresh plain object: hashing it is cheap (hashing the Priority values is not).
    STATE.token = object()


def set_priority(text: str | None) -> None:
    """Set (or with None clear) the explicit process-wide priority."""
    STATE.explicit = _as_priority(text)
    _bump()


@contextlib.contextmanager
def priority(text: str | None) -> Iterator[None]:
    """Use `text` as the explicit priority inside the block."""
    saved = STATE.explicit
    set_priority(text)
    try:
        yield
    finally:
        STATE.explicit = saved
        _bump()


def env_text() -> str | None:
    return os.environ.get(ENV_VAR) or None


def sync_env(text: str | None = None) -> None:
    """Re-read VLLM_XDSL_PRIORITY if it changed (eager dispatch calls this cheaply)."""
    text = env_text() if text is None else text
    if text != STATE.env_text:
        STATE.env = parse_priority(text) if text else None
        STATE.env_text = text
        _bump()


def platform_default(target: str) -> tuple[Choice, ...]:
    try:
        return tuple(Choice(p) for p in PLATFORM_DEFAULTS[target])
    except KeyError:
        raise DispatchError(
            f"unknown dispatch target {target!r} (expected one of {tuple(PLATFORM_DEFAULTS)})"
        ) from None


def resolve(
    op: str, priority: str | Priority | None = None, target: str = "cuda"
) -> tuple[tuple[Choice, ...], str]:
    """The provider list for `op` and the source it came from; `native` always closes it."""
    sync_env()
    fallback = platform_default(target)  # validates target even when a source decides
    sources = (("explicit", _as_priority(priority)), ("set_priority", STATE.explicit),
               (ENV_VAR, STATE.env))
    source, choices = f"default for {target}", fallback
    for name, p in sources:
        found = p.for_op(op) if p is not None else None
        if found is not None:
            source, choices = name, found
            break
    if not any(c.provider == "native" for c in choices):
        choices = (*choices, Choice("native"))
    return choices, source
