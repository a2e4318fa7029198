"""`vllm-opt`: xdsl-opt with this project's dialects, passes and targets.

Every xdsl-opt flag works (`-p`, `--split-input-file`, `--verify-diagnostics`,
`--print-op-generic`, `-t`, `-o`, ...). Each pass is also an mlir-opt-style flag:

    vllm-opt --fuse-norm-quant --lower-dispatch=target=rocm in.mlir
    vllm-opt --lower-dispatch="target=cpu priority=rms_norm=triton,native" in.mlir

Every user error (malformed IR, an op that does not verify, an unknown pass or option)
is one line, `file:line:col: error: message` where a location is known, and a non-zero
exit; with `--verify-diagnostics` the line goes to stdout and the exit is 0.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from vllm_xdsl.tools.diagnostics import (
    UserError,
    locate_failing_op,
    not_utf8_line,
    one_line,
    parse_error_line,
)
from vllm_xdsl.tools.pass_flags import split_pass_flags

TARGETS = {
    "triton": ("vllm_xdsl.backends.triton.target", "TritonSourceTarget"),
}
# xDSL's targets that print this project's IR: `mlir`, the default, the text form (its
# generic form with --print-op-generic).
XDSL_TARGETS = ("mlir",)


class VllmOptMain(xDSLOptMain):
    """xDSLOptMain restricted to this project's dialects and passes, with clear errors."""

    def __init__(self, args: Sequence[str] | None = None) -> None:
        self._source_text = ""
        given = sys.argv[1:] if args is None else args
        # Only --help reads the passes' options (from their source: no pass is imported).
        self._help_requested = any(a in ("-h", "--help") for a in given)
        super().__init__(description="vllm-xdsl optimizer driver", args=args)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
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
            raise UserError(not_utf8_line(self.get_input_name(), text, e, start_offset)) from None
        from io import BytesIO

        try:
            module = super().parse_chunk(BytesIO(text), file_extension, start_offset)
        except ParseError as e:
            raise UserError(parse_error_line(e, start_offset)) from None
        if module is not None:
            self._verify(module, start_offset)
        return module

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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        from vllm_xdsl.transforms import available_passes

        opt = VllmOptMain(split_pass_flags(argv, set(available_passes())))
        opt.run()
    except UserError as e:
        print(str(e), file=sys.stderr)
        return 1
    except (DiagnosticException, ValueError, OSError, KeyError, ArgSpecParseError) as e:
        print(f"vllm-opt: error: {one_line(e)}", file=sys.stderr)
        return 1
    except ParseError as e:
        print(parse_error_line(e, 0), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
