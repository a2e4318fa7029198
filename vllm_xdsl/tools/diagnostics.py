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


class InputParseError(Exception):
    """Input that does not parse, already formatted as one line. Not a
    DiagnosticException: `--verify-diagnostics` must not take it for an expected
    verifier diagnostic (as in xdsl-opt; `--parsing-diagnostics` is for these)."""


def one_line(error: BaseException) -> str:
    """The first meaningful line of an exception's message."""
    text = str(error).strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("Operation does not verify: ")
    return type(error).__name__


def spec_error_line(error: BaseException) -> str:
    """xDSL's pipeline-spec error in one line: its headline, where and what, without the
    caret picture (`Error parsing pass pipeline specification: at 1:31 in
    'lower-dispatch{...}': Unknown token`)."""
    lines = [ln.strip() for ln in str(error).strip().splitlines() if ln.strip()]
    if len(lines) < 4:
        return one_line(error)
    head, where, text, *rest = lines
    what = " ".join(ln for ln in rest if set(ln) != {"^"})
    return f"{head} at {where.partition(':')[2]} in '{text}': {what}"


def parse_error_line(error: ParseError, line_offset: int) -> str:
    loc = error.span.get_location()
    return f"{loc.file}:{loc.line + line_offset}:{loc.col}: error: {parse_error_message(error)}"


def parse_error_message(error: ParseError) -> str:
    """xDSL's message, or one where it has none.

    Some of xDSL's parse errors carry only their context, the head left out: a region
    whose `}` is missing (a file cut off after its last complete line) fails to parse a
    block label and says " in block definition". Those get what the parser found there."""
    if error.msg.strip() and not error.msg.startswith(" "):
        return error.msg
    span = error.span
    at_end = span.start >= len(span.input.content)
    found = "end of file" if at_end else repr(span.content.decode("utf-8", "replace")
                                              if isinstance(span.content, bytes)
                                              else span.content)
    context = error.msg.strip()
    if context == "in block definition":
        hint = "missing '}'?" if at_end else "expected an operation, a block label or '}'"
        return f"unexpected {found} in block definition ({hint})"
    return f"unexpected {found}" + (f" {context}" if context else "")


def not_utf8_line(name: str, data: bytes, error: UnicodeDecodeError, line_offset: int) -> str:
    """`name:line:col: error: not UTF-8 text (byte 0x..)` for input that is not text; the
    column counts bytes, as xDSL's do for byte input."""
    start = error.start
    line = data.count(b"\n", 0, start) + 1 + line_offset
    col = start - (data.rfind(b"\n", 0, start) + 1) + 1
    return f"{name}:{line}:{col}: error: not UTF-8 text (byte 0x{data[start]:02x})"


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
