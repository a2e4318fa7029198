"""vllm-opt as a user meets it: bad input gives one clear line and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.vllm_opt_runner import run_opt

from vllm_xdsl.tools.pass_flags import split_pass_flags

ROOT = Path(__file__).resolve().parents[1]
FILECHECK_DIR = ROOT / "test" / "filecheck"

GOOD_NORM = (
    "func.func @f(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {\n"
    "  %y = vllm.rms_norm %x {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>\n"
    "  func.return %y : tensor<?x64xbf16>\n"
    "}\n"
)


def test_console_script_reports_errors_without_traceback(tmp_path: Path):
    """The installed `vllm-opt` entry point itself, once, in a real process."""
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f( {\n")
    result = subprocess.run(
        [sys.executable, "-m", "vllm_xdsl.tools.vllm_opt", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(f"{bad}:1:15: error:")
    assert "Traceback" not in result.stderr


def _func(body: str, args: str = "%x: tensor<?x64xbf16>") -> str:
    return f"func.func @f({args}) {{\n{body}\n  func.return\n}}\n"


# (name, input text, extra args, expected fragment of the one-line error)
MALFORMED: list[tuple[str, str, tuple[str, ...], str]] = [
    ("unclosed function", "func.func @f(%x: tensor<4xf32>) {\n", (), "error:"),
    ("garbage", "this is not IR\n", (), "error:"),
    (
        "unknown op",
        _func("  %y = vllm.layer_norm %x : tensor<?x64xbf16> -> tensor<?x64xbf16>"),
        (),
        "vllm.layer_norm",
    ),
    ("unknown dialect", _func("  %y = foo.bar %x : tensor<?x64xbf16>"), (), "foo.bar"),
    (
        "undefined value",
        _func("  %y = vllm.silu_and_mul %z : tensor<?x64xbf16> -> tensor<?x32xbf16>"),
        (),
        "%z",
    ),
    (
        "bad type",
        _func("  %y = vllm.silu_and_mul %x : tensor<?x64xbogus> -> tensor<?x32xbf16>"),
        (),
        "error:",
    ),
    (
        "type mismatch with def",
        _func("  %y = vllm.silu_and_mul %x : tensor<?x32xbf16> -> tensor<?x16xbf16>"),
        (),
        "error:",
    ),
    (
        "weight size",
        _func(
            "  %y = vllm.rms_norm %x weight(%w : tensor<32xbf16>) {epsilon = 1.0e-05 : f64} "
            ": tensor<?x64xbf16> -> tensor<?x64xbf16>",
            "%x: tensor<?x64xbf16>, %w: tensor<32xbf16>",
        ),
        (),
        "weight size 32 does not match the hidden size 64",
    ),
    (
        "missing epsilon",
        _func("  %y = vllm.rms_norm %x : tensor<?x64xbf16> -> tensor<?x64xbf16>"),
        (),
        "epsilon must be given exactly once",
    ),
    (
        "quant result not fp8",
        _func(
            "  %q = vllm.static_scaled_fp8_quant %x, %s : tensor<?x64xbf16>, tensor<1xf32> -> "
            "tensor<?x64xf16>",
            "%x: tensor<?x64xbf16>, %s: tensor<1xf32>",
        ),
        (),
        "must be fp8",
    ),
    (
        "odd silu",
        _func(
            "  %y = vllm.silu_and_mul %x : tensor<?x63xbf16> -> tensor<?x31xbf16>",
            "%x: tensor<?x63xbf16>",
        ),
        (),
        "even last dimension",
    ),
    (
        "group size",
        _func(
            "  %q, %s = vllm.per_token_group_fp8_quant %x {group_size = 48 : i64} : tensor<?x64xbf16> "
            "-> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>"
        ),
        (),
        "group_size 48 does not divide",
    ),
    (
        "bad scheme keyword",
        _func(
            "  %q, %s = vllm.rms_norm_quant %x {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<dynamic "
            "per_row>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>"
        ),
        (),
        "expected per_tensor, per_token or per_group",
    ),
    (
        "invalid scheme",
        _func(
            "  %q, %s = vllm.rms_norm_quant %x {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<static "
            "per_token>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>"
        ),
        (),
        "a static scale is per tensor",
    ),
    (
        "scheme vs result",
        _func(
            "  %q, %s = vllm.rms_norm_quant %x {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<dynamic "
            "per_group 32>} : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x2xf32>"
        ),
        (),
        "per-group quantization is fp8 only",
    ),
    (
        "wrong property type",
        _func(
            "  %y = vllm.rms_norm %x {epsilon = 1 : i64} : tensor<?x64xbf16> -> tensor<?x64xbf16>"
        ),
        (),
        "error:",
    ),
    (
        "unqualified torch target",
        _func(
            '  %y = torch.call "neg"(%x) [#torch.operand<0>] : (tensor<?x64xbf16>) -> tensor<?x64xbf16>'
        ),
        (),
        "qualified overload name",
    ),
    (
        "dangling operand ref",
        _func(
            '  %y = torch.call "aten::neg.default"(%x) [#torch.operand<3>] : (tensor<?x64xbf16>) -> '
            "tensor<?x64xbf16>"
        ),
        (),
        "refers past",
    ),
    (
        "bad provider property",
        _func(
            "  %y = triton.rms_norm %x {epsilon = 1.0e-05 : f64, block_size = 100 : i64} : "
            "tensor<?x64xbf16> -> tensor<?x64xbf16>"
        ),
        (),
        "block_size must be a power of two",
    ),
    (
        "no in-place variant",
        _func("  %y = cuda.silu_and_mul %x {inplace} : tensor<?x64xbf16> -> tensor<?x32xbf16>"),
        (),
        "has no in-place variant",
    ),
    ("unknown pass via -p", GOOD_NORM, ("-p", "no-such-pass"), "no-such-pass"),
    ("unknown flag", GOOD_NORM, ("--no-such-pass",), "unrecognized argument: --no-such-pass"),
    ("unknown target", GOOD_NORM, ("-t", "no-such-target"), "no-such-target"),
    ("bad pipeline syntax", GOOD_NORM, ("-p", "canonicalize{"), "error"),
    (
        "unknown torch op",
        _func(
            '  %y = torch.call "aten::negg.default"(%x) [#torch.operand<0>] : (tensor<?x64xbf16>) '
            "-> tensor<?x64xbf16>"
        ),
        (),
        "unknown torch op 'aten::negg.default'",
    ),
]


@pytest.mark.parametrize("args, expected", [
    (("--lower-dispatch=report=yes",),
     "vllm-opt: error: pass 'lower-dispatch': option 'report' expects true or false, got 'yes'"),
    (("-p", "lower-dispatch{report=yes}"),
     "vllm-opt: error: pass 'lower-dispatch': option 'report' expects true or false, got 'yes'"),
    (("-p", "raise-native{exact=1}"),
     "vllm-opt: error: pass 'raise-native': option 'exact' expects true or false, got 1"),
    (("-p", "raise-native{approx=true}"),  # removed: it had no effect
     "vllm-opt: error: pass 'raise-native' has no option 'approx' (options: exact)"),
    (("--fuse-norm-quant=raise-rounded-adds=true",),  # removed: it had no effect
     "vllm-opt: error: pass 'fuse-norm-quant' has no option 'raise-rounded-adds' "
     "(options: none)"),
    (("--lower-dispatch=target=3",),
     "vllm-opt: error: pass 'lower-dispatch': option 'target' expects a string, got 3"),
])
def test_bad_pass_option_names_the_pass_and_option(args: tuple[str, ...], expected: str):
    result = run_opt(*args, stdin=GOOD_NORM)
    assert result.returncode == 1
    assert result.stderr == expected + "\n"


@pytest.mark.parametrize(
    "text,args,expected", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_input_gives_one_clear_line(text: str, args: tuple[str, ...], expected: str):
    result = run_opt(*args, stdin=text)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    assert expected in result.stderr
    # One line of diagnosis (argparse adds its usage block before its one error line).
    error_lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(error_lines) == 1, result.stderr


def test_there_are_at_least_twenty_malformed_cases():
    assert len(MALFORMED) >= 20


def test_verifier_error_points_at_the_op_line():
    text = _func(
        "  %y = vllm.rms_norm %x {epsilon = -1.0 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>"
    )
    result = run_opt(stdin=text)
    assert result.returncode == 1
    assert result.stderr.strip().startswith("stdin:2:3: error: 'vllm.rms_norm' op epsilon must be")


def test_missing_file_is_one_line(tmp_path: Path):
    result = run_opt(str(tmp_path / "absent.mlir"))
    assert result.returncode == 1
    assert "No such file" in result.stderr and "Traceback" not in result.stderr


def _valid_ir_files() -> list[Path]:
    """Test and example files that hold valid IR (not diagnostics tests)."""
    examples = ROOT / "vllm_xdsl" / "examples"
    files = sorted(FILECHECK_DIR.glob("*.mlir")) + sorted(examples.glob("*.mlir"))
    return [
        f
        for f in files
        if "verify-diagnostics" not in f.read_text() and "not vllm-opt" not in f.read_text()
    ]


@pytest.mark.parametrize("path", _valid_ir_files(), ids=lambda p: p.name)
def test_generic_form_round_trips(path: Path):
    """`vllm-opt X --print-op-generic | vllm-opt` reproduces `vllm-opt X`."""
    run_lines = [line for line in path.read_text().splitlines() if "RUN:" in line]
    split = ("--split-input-file",) if any("split-input-file" in r for r in run_lines) else ()
    custom = run_opt(str(path), *split)
    assert custom.returncode == 0, custom.stderr
    generic = run_opt(str(path), *split, "--print-op-generic")
    assert generic.returncode == 0, generic.stderr
    chunks = generic.stdout.split("// -----\n")
    reparsed = "// -----\n".join(run_opt(stdin=chunk).stdout for chunk in chunks)
    assert reparsed == custom.stdout


def test_pass_flags_become_one_pipeline():
    passes = {"fuse-norm-quant", "lower-dispatch"}
    argv = ["--fuse-norm-quant", "in.mlir", "--lower-dispatch=target=rocm"]
    assert split_pass_flags(argv, passes) == [
        "-p",
        "fuse-norm-quant,lower-dispatch{target=rocm}",
        "in.mlir",
    ]


def test_pass_flag_options_are_quoted_for_the_pipeline_parser():
    argv = ["-p", "canonicalize", "--lower-dispatch=target=cpu priority=rms_norm=triton,native"]
    assert split_pass_flags(argv, {"lower-dispatch"}) == [
        "-p",
        'canonicalize,lower-dispatch{target=cpu priority="rms_norm=triton,native"}',
    ]


def test_a_forced_bare_priority_list_reaches_the_pass(tmp_path: Path):
    """`!` is not a bare token of xDSL's pipeline syntax: the flag quotes it."""
    src = tmp_path / "in.mlir"
    src.write_text(GOOD_NORM)
    res = run_opt(str(src), "--lower-dispatch=target=cuda priority=triton!")
    assert res.returncode == 0, res.stderr
    assert "triton.rms_norm" in res.stdout


def test_a_bad_pipeline_spec_is_one_line_saying_where_and_what(tmp_path: Path):
    src = tmp_path / "in.mlir"
    src.write_text(GOOD_NORM)
    res = run_opt(str(src), "-p", "lower-dispatch{priority=triton!}")
    assert res.returncode == 1
    assert res.stderr == ("vllm-opt: error: Error parsing pass pipeline specification: at 1:31 "
                          "in 'lower-dispatch{priority=triton!}': Unknown token\n")


def test_pass_flag_option_without_value_is_an_error():
    with pytest.raises(ValueError, match="must be key=value"):
        split_pass_flags(["--lower-dispatch=cpu"], {"lower-dispatch"})


EXAMPLE = ROOT / "vllm_xdsl" / "examples" / "llama_decoder_layer.mlir"


def test_a_file_cut_off_after_a_line_says_end_of_file(tmp_path: Path):
    """A region whose `}` is missing: xDSL's own message is empty (" in block definition")."""
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "func.func" in line)
    cut = tmp_path / "cut.mlir"
    # Keep lines[:n]: cuts spread over the module (every one takes a parse of it), the
    # first and the last among them.
    for n in sorted({*range(first + 1, len(lines), 10), len(lines) - 1}):
        cut.write_text("".join(lines[:n]))
        result = run_opt(str(cut))
        assert (result.returncode, result.stderr) == (
            1, f"{cut}:{n + 1}:1: error: unexpected end of file in block definition "
               "(missing '}'?)\n"), f"cut after line {n}"


def test_a_stray_token_where_an_op_or_block_goes_is_named():
    result = run_opt(stdin="func.func @f() {\n  )\n}\n")
    assert result.returncode == 1
    assert result.stderr == ("stdin:2:3: error: unexpected ')' in block definition "
                             "(expected an operation, a block label or '}')\n")


@pytest.mark.parametrize("data,where,byte", [
    (bytes([0x97, 0x13, 0xFE, 0x00]) * 50, "1:1", "0x97"),  # random bytes
    (b"func.func @f() {\n  func.return\xff\n}\n", "2:14", "0xff"),
])
def test_binary_input_is_named_with_where_it_stops_being_text(tmp_path: Path, data: bytes,
                                                              where: str, byte: str):
    path = tmp_path / "x.mlir"
    path.write_bytes(data)
    result = run_opt(str(path))
    assert result.returncode == 1
    assert result.stderr == f"{path}:{where}: error: not UTF-8 text (byte {byte})\n"


def test_binary_input_in_a_later_split_chunk_counts_the_lines_before(tmp_path: Path):
    path = tmp_path / "split.mlir"
    path.write_bytes(b"func.func @f() {\n  func.return\n}\n// -----\nfunc.func @g() {\n\xc3(\n}\n")
    result = run_opt(str(path), "--split-input-file")
    assert result.returncode == 1
    assert result.stderr == f"{path}:6:1: error: not UTF-8 text (byte 0xc3)\n"


def test_an_unknown_provider_in_priority_is_a_bad_option():
    """Reported as the pass option it is, before the input is read (here: not IR at all),
    with the providers that exist; not against the first node that uses it."""
    for stdin in (GOOD_NORM, "this is not IR\n"):
        result = run_opt("--lower-dispatch=priority=nonexistent,native", stdin=stdin)
        assert result.returncode == 1
        assert result.stderr.startswith(
            "vllm-opt: error: pass 'lower-dispatch': option 'priority': unknown provider "
            "'nonexistent' (known: cpu, cuda, native, "), result.stderr
        assert result.stderr.endswith(", auto)\n") and result.stderr.count("\n") == 1


def test_an_unknown_provider_in_the_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "rms_norm=nonexistent")
    result = run_opt("--lower-dispatch=target=cpu", stdin=GOOD_NORM)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "stdin: error: lower-dispatch: VLLM_XDSL_PRIORITY: unknown provider 'nonexistent' "
        "(known: "), result.stderr
    assert result.stderr.count("\n") == 1


def test_targets_are_the_ones_that_print_this_projects_ir():
    result = run_opt("-t", "csl", stdin=GOOD_NORM)
    assert (result.returncode, result.stderr) == (2, (
        "vllm-opt: error: argument -t/--target: invalid choice: 'csl' (choose from mlir, "
        "triton); see 'vllm-opt --help'\n"))
    result = run_opt("-t", "mlir", stdin=GOOD_NORM)
    assert result.returncode == 0 and "vllm.rms_norm" in result.stdout


@pytest.mark.parametrize("args,expected", [
    (("--fuse-norm-quantt",), "unrecognized argument: --fuse-norm-quantt "
                              "(did you mean '--fuse-norm-quant'?)"),
    (("--lower-dispach=target=cpu",), "unrecognized argument: --lower-dispach=target=cpu "
                                      "(did you mean '--lower-dispatch'?)"),
    (("--split-input-fle",), "unrecognized argument: --split-input-fle "
                             "(did you mean '--split-input-file'?)"),
    (("--zzzz",), "unrecognized argument: --zzzz"),
    (("-t", "llvm"), "argument -t/--target: invalid choice: 'llvm' (choose from mlir, triton)"),
    (("-t", "tritn"), "argument -t/--target: invalid choice: 'tritn' (choose from mlir, "
                      "triton) (did you mean 'triton'?)"),
])
def test_a_bad_command_line_is_one_line_with_the_closest_flag(args: tuple[str, ...],
                                                               expected: str):
    """Not argparse's usage block: one line, with a suggestion where one is close."""
    result = run_opt(*args, stdin=GOOD_NORM)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"vllm-opt: error: {expected}; see 'vllm-opt --help'\n"


def test_version_names_vllm_xdsl_and_xdsl():
    from importlib.metadata import version

    result = run_opt("-v")
    assert result.returncode == 0
    assert result.stdout == (f"vllm-opt from vllm-xdsl {version('vllm-xdsl')}, "
                             f"built on xdsl {version('xdsl')}\n")


PARSE_ERRORS = [
    # (input bytes, the one diagnostic line after "<file>:")
    (b"func.func @f() {\n  func.return\n", "3:1: error: unexpected end of file in block "
                                         "definition (missing '}'?)"),
    (b"func.func @f() {\n  %z = foo bar\n}\n", "2:12: error: Operation foo is not registered"),
    (b"func.func @f() {\n  )\n}\n", "2:3: error: unexpected ')' in block definition "
                                   "(expected an operation, a block label or '}')"),
    (b"func.func @f() {\n  func.return\xff\n}\n", "2:14: error: not UTF-8 text (byte 0xff)"),
]


@pytest.mark.parametrize("data,line", PARSE_ERRORS)
def test_parsing_diagnostics_print_the_parse_error_to_stdout_and_exit_0(
        tmp_path: Path, data: bytes, line: str):
    """As xdsl-opt's flag does (so a lit test can FileCheck a parse error), for every kind
    of parse error alike; without the flag the same line is the error on stderr."""
    path = tmp_path / "x.mlir"
    path.write_bytes(data)
    result = run_opt("--parsing-diagnostics", str(path))
    assert (result.returncode, result.stdout, result.stderr) == (0, f"{path}:{line}\n", "")
    result = run_opt(str(path))
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"{path}:{line}\n")
    # A parse error is not a verifier diagnostic (as in xdsl-opt).
    assert run_opt("--verify-diagnostics", str(path)).returncode == 1


def test_parsing_diagnostics_go_on_with_the_next_chunk(tmp_path: Path):
    path = tmp_path / "split.mlir"
    path.write_text("func.func @f() {\n  )\n}\n// -----\n" + GOOD_NORM)
    result = run_opt("--parsing-diagnostics", "--split-input-file", str(path))
    assert result.returncode == 0
    assert result.stdout.startswith(f"{path}:2:3: error: unexpected ')'")
    assert "vllm.rms_norm" in result.stdout


def test_the_diagnostics_flags_help_says_what_they_do():
    result = run_opt("--help")
    text = " ".join(result.stdout.split())
    assert ("--parsing-diagnostics print a parse error's one-line diagnostic to stdout and "
            "exit with code 0") in text
    assert ("--verify-diagnostics print a verifier or pass error's one-line diagnostic to "
            "stdout and exit with code 0") in text
