"""One-line diagnostics for vllm-opt: `file:line:col: error: message`.

xDSL reports a verifier failure by printing the whole module; users want the line of
the op. Ops do not keep their source location, so the failing op is found by walking
the module, and its line by looking up its first result's name (`%y = vllm.rms_norm`)
in the source text. When that is ambiguous or absent, the message has no line.
"""

from __future__ import annotations

import re

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.utils.exceptions import DiagnosticException, ParseError


class UserError(DiagnosticException):
    """An error in the user's input, already formatted as one line."""


def one_line(error: BaseException) -> str:
    """The first meaningful line of an exception's message."""
    text = str(error).strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("Operation does not verify: ")
    return type(error).__name__


def parse_error_line(error: ParseError, line_offset: int) -> str:
    loc = error.span.get_location()
    return f"{loc.file}:{loc.line + line_offset}:{loc.col}: error: {error.msg}"


def locate_failing_op(module: ModuleOp, source: str) -> tuple[tuple[int, int] | None, str] | None:
    """The first op that does not verify: ((line, col) or None, message), or None."""
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as e:
            return _find_in_source(op, source), f"'{op.name}' op {_reason(e)}"
    return None


def _reason(error: DiagnosticException) -> str:
    text = str(error.args[0]) if error.args else str(error)
    return text.removeprefix("Operation does not verify: ").strip().splitlines()[0]


def _find_in_source(op: Operation, source: str) -> tuple[int, int] | None:
    if op.results and op.results[0].name_hint:
        pattern = rf"%{re.escape(op.results[0].name_hint)}\b[^=\n]*=\s*\"?{re.escape(op.name)}\b"
    else:
        pattern = rf"\"?{re.escape(op.name)}\b"
    matches = list(re.finditer(pattern, source))
    if len(matches) != 1:
        return None
    start = matches[0].start()
    line = source.count("\n", 0, start) + 1
    col = start - (source.rfind("\n", 0, start) + 1) + 1
    return line, col
