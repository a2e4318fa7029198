"""`vllm-opt --help` lists every pass flag with a description and every option with its
type, default and meaning, all read from the pass classes."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import ClassVar

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from vllm_xdsl.tools.pass_help import UNDOCUMENTED, format_pass_flags, pass_help
from vllm_xdsl.transforms import PASS_MODULES, available_passes


def _vllm_opt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_xdsl.tools.vllm_opt", *args],
        capture_output=True, text=True, timeout=300,
    )


@pytest.fixture(scope="module")
def help_text() -> str:
    result = _vllm_opt("--help")
    assert result.returncode == 0, result.stderr
    return result.stdout


def _section(help_text: str, name: str) -> list[str]:
    """The lines of one pass flag's entry: from `  --name` up to the next flag."""
    lines = help_text.splitlines()
    start = lines.index(f"  --{name}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("  --")),
               len(lines))
    return lines[start + 1:end]


def _expected_default(field: dataclasses.Field[object]) -> str:
    if field.default is None:
        return "unset"
    return str(field.default).lower() if isinstance(field.default, bool) else str(field.default)


@pytest.mark.parametrize("name", sorted(available_passes()))
def test_every_pass_flag_is_listed_with_its_options(help_text: str, name: str):
    section = _section(help_text, name)
    assert section and section[0].strip() and UNDOCUMENTED not in section[0]
    cls = available_passes()[name]()
    for field in dataclasses.fields(cls):
        option = field.name.replace("_", "-")
        heads = [i for i, line in enumerate(section) if line.strip().startswith(f"{option}: ")]
        assert len(heads) == 1, f"--{name}: option {option} not listed once"
        head = section[heads[0]]
        assert f"(default: {_expected_default(field)})" in head, head
        meaning = section[heads[0] + 1].strip()
        assert meaning and UNDOCUMENTED not in meaning, f"--{name} {option}: no meaning"


def test_the_options_the_readme_names_are_listed(help_text: str):
    listed = {
        name: {line.split(":")[0].strip() for line in _section(help_text, name)
               if "(default: " in line}
        for name in PASS_MODULES
    }
    assert listed == {
        "raise-native": {"exact"},
        "fuse-norm-quant": set(),
        "lower-dispatch": {"target", "priority", "report"},
    }
    assert "      report: bool (default: false)" in help_text.splitlines()


def test_project_passes_come_first(help_text: str):
    flags = [line.strip() for line in help_text.splitlines() if line.startswith("  --")
             and line.strip().lstrip("-") in available_passes()]
    assert flags[: len(PASS_MODULES)] == [f"--{name}" for name in PASS_MODULES]


@dataclass(frozen=True)
class _NewPass(ModulePass):
    """A pass added later.

    Only the first paragraph is the description."""

    name = "new-pass"

    documented_level: int = 3
    """How much to do."""

    forgotten: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pass


def test_new_options_show_up_and_undocumented_ones_say_so():
    entry = pass_help("new-pass", _NewPass)
    assert entry.description == "A pass added later."
    assert [(o.name, o.type, o.default, o.meaning) for o in entry.options] == [
        ("documented-level", "int", "3", "How much to do."),
        ("forgotten", "bool", "true", UNDOCUMENTED),
    ]
    text = format_pass_flags({"new-pass": lambda: _NewPass})
    assert "      forgotten: bool (default: true)\n          " + UNDOCUMENTED in text


def test_a_plain_run_imports_no_pass_module():
    """A plain run keeps vllm-opt's lazy start: no pass module is imported to build argv."""
    code = (
        "import sys; from vllm_xdsl.tools.vllm_opt import VllmOptMain; VllmOptMain(['x.mlir']);"
        "print(sorted(m for m in sys.modules if m.startswith('vllm_xdsl.transforms.')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"



def test_module_file_finds_a_pass_module_without_importing_its_folder():
    """The passes live in folders; find_spec would import the folder to find the module."""
    code = (
        "import sys; from vllm_xdsl.transforms import module_file\n"
        "print(module_file('vllm_xdsl.transforms.raising.raise_native'))\n"
        "print(module_file('vllm_xdsl.transforms.raising.no_such_pass'))\n"
        "print(module_file('vllm_xdsl.no_such_folder.x'))\n"
        "print(sorted(m for m in sys.modules if m.startswith('vllm_xdsl.transforms.')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    found, missing, no_folder, imported = result.stdout.splitlines()
    assert found.endswith("vllm_xdsl/transforms/raising/raise_native.py")
    assert (missing, no_folder, imported) == ("None", "None", "[]")

def test_help_imports_neither_torch_nor_a_pass():
    """--help reads the passes' source: importing them would import torch (seconds)."""
    code = (
        "import sys\n"
        "from vllm_xdsl.tools.vllm_opt import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert not e.code\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')"
        " or m.startswith('vllm_xdsl.transforms.') or m.startswith('xdsl.transforms.')),"
        " file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "  --lower-dispatch" in result.stdout  # the help was printed, with the passes
    assert result.stderr.strip() == "[]"


def test_only_the_targets_that_print_this_projects_ir(help_text: str):
    from vllm_xdsl.tools.vllm_opt import VllmOptMain

    assert list(VllmOptMain(["x.mlir"]).available_targets) == ["mlir", "triton"]
    assert "Available targets are: mlir,triton" in " ".join(help_text.split())


@dataclass(frozen=True)
class _BasePass(ModulePass):
    """A base with options."""

    name = "base-pass"

    level: int = 1
    """The level."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pass


class _Mixin:
    not_a_field: int = 5  # not a dataclass: no option
    """Not an option."""


@dataclass(frozen=True)
class _DerivedPass(_Mixin, _BasePass):
    """Options inherited, redeclared and new."""

    name = "derived-pass"
    kind: ClassVar[str] = "no option either"

    level: int = 2
    names: tuple[str, ...] = dc_field(default=("a", "b"))
    """The names."""
    made: tuple[int, ...] = dc_field(default_factory=tuple)
    """Computed."""
    limit: float | None = None
    """A limit."""


def test_options_read_from_source_are_the_dataclass_fields():
    """Inherited, redeclared (keeps its place and its docstring), field(...) and ClassVar:
    the source reader agrees with dataclasses.fields of the imported class."""
    entry = pass_help("derived-pass", _DerivedPass)
    assert entry.description == "Options inherited, redeclared and new."
    assert [o.name for o in entry.options] == [
        f.name.replace("_", "-") for f in dataclasses.fields(_DerivedPass)]
    assert [(o.name, o.type, o.default, o.meaning) for o in entry.options] == [
        ("level", "int", "2", "The level."),
        ("names", "tuple[str, ...]", "('a', 'b')", "The names."),
        ("made", "tuple[int, ...]", "computed", "Computed."),
        ("limit", "float", "unset", "A limit."),
    ]
