"""mlir-opt-style pass flags for vllm-opt.

`--fuse-norm-quant --lower-dispatch=target=rocm` becomes the xDSL pipeline
`fuse-norm-quant,lower-dispatch{target=rocm}`, appended after any `-p` pipeline, in the
order the flags were given. Option values that contain pipeline punctuation (`=`, `,`,
`;`) are quoted for xDSL's pipeline parser.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

_SPECIAL = set("=,;{} !")  # what xDSL's pipeline lexer takes only quoted


def split_pass_flags(argv: Sequence[str], pass_names: set[str]) -> list[str]:
    """argv with each `--<pass>[=options]` folded into one `-p` pipeline."""
    rest: list[str] = []
    pipeline: list[str] = []
    explicit: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, _, options = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if name in pass_names:
            pipeline.append(_pipeline_element(name, options))
        elif arg in ("-p", "--passes") and i + 1 < len(argv):
            explicit.append(argv[i + 1])
            i += 1
        elif arg.startswith("--passes="):
            explicit.append(arg.partition("=")[2])
        else:
            rest.append(arg)
        i += 1
    elements = [p for p in (*explicit, *pipeline) if p]
    return ["-p", ",".join(elements), *rest] if elements else rest


def _pipeline_element(name: str, options: str) -> str:
    if not options:
        return name
    parts = []
    for item in shlex.split(options):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"pass option '{item}' of --{name} must be key=value")
        if any(c in _SPECIAL for c in value) and not value.startswith('"'):
            value = '"' + value.replace('"', '\\"') + '"'
        parts.append(f"{key}={value}")
    return f"{name}{{{' '.join(parts)}}}"
