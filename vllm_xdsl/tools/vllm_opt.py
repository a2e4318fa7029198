"""`vllm-opt`: xdsl-opt with this project's dialects, passes and targets.

Every xdsl-opt flag works (`-p`, `--split-input-file`, `--verify-diagnostics`,
`--print-op-generic`, `-t`, `-o`, ...). Each pass is also an mlir-opt-style flag:

    vllm-opt --fuse-norm-quant --lower-dispatch=target=rocm in.mlir
    vllm-opt --lower-dispatch="target=cpu priority=rms_norm=triton,native" in.mlir

Every user error (malformed IR, an op that does not verify, an unknown pass, flag or
option) is one line on stderr, `file:line:col: error: message` where a location is known,
and a non-zero exit (2 for a bad command line, as argparse's, else 1). The diagnostics
flags turn an expected error into output, as xdsl-opt's do, so that a lit test can
FileCheck it: with `--parsing-diagnostics` a parse error (a cut-off file and input that is
not UTF-8 text included), with `--verify-diagnostics` a verifier or pass error, is that
same line on stdout, and the exit is 0.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from vllm_xdsl.tools.diagnostics import (
    InputParseError,
    UserError,
    locate_failing_op,
    not_utf8_line,
    one_line,
    parse_error_line,
    spec_error_line,
)
from vllm_xdsl.tools.pass_flags import split_pass_flags

TARGETS = {
    "triton": ("vllm_xdsl.backends.triton.target", "TritonSourceTarget"),
}
# xDSL's targets that print this project's IR: `mlir`, the default, the text form (its
# generic form with --print-op-generic).
XDSL_TARGETS = ("mlir",)


PARSING_DIAGNOSTICS_HELP = (
    "print a parse error's one-line diagnostic to stdout and exit with code 0 "
    "(for testing the diagnostics)"
)
VERIFY_DIAGNOSTICS_HELP = (
    "print a verifier or pass error's one-line diagnostic to stdout and exit with "
    "code 0 (for testing the diagnostics)"
)


def _version_format() -> str:
    try:
        ours = metadata.version("vllm-xdsl")
    except metadata.PackageNotFoundError:
        ours = "unknown (not installed)"
    return f"vllm-opt from vllm-xdsl {ours}, built on xdsl {{xdsl_version}}"


class VllmOptMain(xDSLOptMain):
    """xDSLOptMain restricted to this project's dialects and passes, with clear errors."""

    version_format = _version_format()

    def __init__(self, args: Sequence[str] | None = None) -> None:
        self._source_text = ""
        given = sys.argv[1:] if args is None else args
        # Only --help reads the passes' options (from their source: no pass is imported).
        self._help_requested = any(a in ("-h", "--help") for a in given)
        super().__init__(description="vllm-xdsl optimizer driver", args=args)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        for action in arg_parser._actions:
            if "--parsing-diagnostics" in action.option_strings:
                action.help = PARSING_DIAGNOSTICS_HELP
            elif "--verify-diagnostics" in action.option_strings:
                action.help = VERIFY_DIAGNOSTICS_HELP
        # argparse's own errors print the whole usage block: one line instead.
        arg_parser.error = functools.partial(_command_line_error, arg_parser,  # type: ignore[method-assign,assignment]
                                             [f"--{name}" for name in self.available_passes])
        if self._help_requested:
            from vllm_xdsl.tools.pass_help import add_pass_help

            add_pass_help(arg_parser, self.available_passes)

    def register_all_dialects(self) -> None:
        from vllm_xdsl.dialects import dialect_factories

        for name, factory in dialect_factories().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        from vllm_xdsl.transforms import available_passes

        for name, factory in available_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        import importlib
        import importlib.util

        from xdsl.targets import get_all_targets

        # Not xDSL's others (arm-asm, csl, wgsl, ...): they print dialects we do not load.
        xdsl_targets = get_all_targets()
        for name in XDSL_TARGETS:
            self.available_targets[name] = xdsl_targets[name]
        for name, (module, cls) in TARGETS.items():
            if importlib.util.find_spec(module) is not None:
                # A factory without parameters: xdsl-opt calls one with parameters as a
                # legacy printer(module, stream).
                self.available_targets[name] = functools.partial(
                    lambda m, c: getattr(importlib.import_module(m), c), module, cls
                )

    def setup_pipeline(self) -> None:
        try:
            super().setup_pipeline()
        except ValueError as e:  # xDSL's message names neither the pass nor the option
            from vllm_xdsl.pass_options import explain_pipeline

            raise ValueError(explain_pipeline(self.available_passes, self.args.passes) or e) from None

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        text = chunk.read()
        try:
            self._source_text = text.decode("utf-8")
        except UnicodeDecodeError as e:  # xDSL's message names neither the file nor where
            self._parse_failed(not_utf8_line(self.get_input_name(), text, e, start_offset))
            return None
        from io import BytesIO

        try:
            module = super().parse_chunk(BytesIO(text), file_extension, start_offset)
        except ParseError as e:
            self._parse_failed(parse_error_line(e, start_offset))
            return None
        if module is not None:
            self._verify(module, start_offset)
        return module

    def _parse_failed(self, line: str) -> None:
        """A parse error: the expected output under --parsing-diagnostics (then the next
        chunk is read), else the error."""
        if self.args.parsing_diagnostics:
            print(line)
            return None
        raise InputParseError(line)

    def apply_passes(self, prog: ModuleOp) -> None:
        try:
            super().apply_passes(prog)
        except UserError:
            raise
        except DiagnosticException as e:
            self._verify(prog, 0)  # prefer pointing at the op that no longer verifies
            raise UserError(f"{self.get_input_name()}: error: {one_line(e)}") from None
        except ValueError as e:
            raise UserError(f"{self.get_input_name()}: error: {one_line(e)}") from None

    def _verify(self, module: ModuleOp, line_offset: int) -> None:
        failure = locate_failing_op(module, self._source_text)
        if failure is None:
            return
        where, message = failure
        if where is not None:
            line, col = where
            prefix = f"{self.get_input_name()}:{line + line_offset}:{col}"
        else:
            prefix = self.get_input_name()
        raise UserError(f"{prefix}: error: {message}")


def _command_line_error(parser: argparse.ArgumentParser, pass_flags: list[str],
                        message: str) -> None:
    """argparse's error as one line, with the closest flag or target for a typo."""
    hint = ""
    if message.startswith("unrecognized arguments: "):
        flags = [f for a in parser._actions for f in a.option_strings] + pass_flags
        unknown = message.removeprefix("unrecognized arguments: ").split()
        message = f"unrecognized argument{'s' if len(unknown) > 1 else ''}: {' '.join(unknown)}"
        for arg in unknown:
            close = difflib.get_close_matches(arg.partition("=")[0], flags, n=1)
            if close:
                hint = f" (did you mean {close[0]!r}?)"
                break
    elif "invalid choice: " in message:
        given = message.split("invalid choice: ", 1)[1].split("'")[1]
        choices = message.rpartition("(choose from ")[2].rstrip(")").replace("'", "").split(", ")
        close = difflib.get_close_matches(given, choices, n=1)
        if close:
            hint = f" (did you mean {close[0]!r}?)"
    parser.exit(2, f"vllm-opt: error: {message}{hint}; see 'vllm-opt --help'\n")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        from vllm_xdsl.transforms import available_passes

        opt = VllmOptMain(split_pass_flags(argv, set(available_passes())))
        opt.run()
    except (UserError, InputParseError) as e:
        print(str(e), file=sys.stderr)
        return 1
    except ArgSpecParseError as e:
        print(f"vllm-opt: error: {spec_error_line(e)}", file=sys.stderr)
        return 1
    except (DiagnosticException, ValueError, OSError, KeyError) as e:
        print(f"vllm-opt: error: {one_line(e)}", file=sys.stderr)
        return 1
    except ParseError as e:
        print(parse_error_line(e, 0), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
