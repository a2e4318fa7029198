"""The contract document docs/OPS.md: in the project, pointed to, and naming every op.

An op without a written contract fails here: each semantic op registered in
`vllm_xdsl.ops` and each op of the `vllm` dialect needs a row of its own in one of the
OPS.md op tables (`| `name` | arguments | results | meaning |`).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_xdsl import ops
from vllm_xdsl.dialects.vllm import Vllm

ROOT = Path(__file__).resolve().parents[1]
OPS_MD = ROOT / "docs" / "OPS.md"
# Files whose notes may mention the old location (they record what happened then).
HISTORICAL = {"bench/RESULTS.md"}


def _contract_rows() -> set[str]:
    """Op names that start a row of a table with a `meaning` column."""
    names: set[str] = set()
    in_op_table = False
    for line in OPS_MD.read_text().splitlines():
        if not line.startswith("|"):
            in_op_table = False
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "op" and "meaning" in cells:
            in_op_table = True
        elif in_op_table and (m := re.fullmatch(r"`([a-z0-9_]+)`", cells[0])):
            names.add(m.group(1))
    return names


def test_contract_document_is_in_the_project():
    assert OPS_MD.is_file()
    tracked = subprocess.run(
        ["git", "ls-files", "--error-unmatch", "docs/OPS.md"], cwd=ROOT, capture_output=True
    )
    if tracked.returncode == 128 and b"not a git repository" in tracked.stderr:
        pytest.skip("not a git checkout: cannot ask whether docs/OPS.md is tracked")
    assert tracked.returncode == 0, "docs/OPS.md exists but is not committed"


@pytest.mark.parametrize("name", sorted(ops.ALL_OPS))
def test_every_semantic_op_has_a_written_contract(name: str):
    assert name in _contract_rows(), f"docs/OPS.md has no contract row for ops.{name}"


@pytest.mark.parametrize("name", sorted(op.name for op in Vllm.operations))
def test_every_vllm_dialect_op_has_a_written_contract(name: str):
    semantic = name.removeprefix("vllm.")
    assert semantic in _contract_rows(), f"docs/OPS.md has no contract row for {name}"


def test_contract_rows_are_real_ops():
    """A row for an op that does not exist is a stale contract."""
    assert _contract_rows() <= set(ops.ALL_OPS)


def _project_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: no file list")
    suffixes = {".py", ".md", ".toml", ".mlir", ".cfg", ".sh", ".txt", ""}
    paths = [ROOT / p for p in listed.stdout.splitlines() if p not in HISTORICAL]
    this = Path(__file__).resolve()
    return [p for p in paths if p.suffix in suffixes and p.is_file() and p.resolve() != this]


def test_every_reference_names_the_document_in_the_project():
    """`OPS.md` (the one document) or `docs/OPS.md`; never another path, e.g. shared/."""
    stale = [
        f"{p.relative_to(ROOT)}:{i}: {ref}"
        for p in _project_text_files()
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        for ref in re.findall(r"[\w./-]*OPS\.md", line)
        if ref not in ("OPS.md", "docs/OPS.md")
    ]
    assert not stale, f"references to OPS.md elsewhere than docs/: {stale}"
    assert [p for p in ROOT.rglob("OPS.md") if ".git" not in p.parts] == [OPS_MD]


def test_verify_help_points_to_the_document():
    result = subprocess.run(
        [sys.executable, "-m", "vllm_xdsl.verify", "--help"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "docs/OPS.md" in result.stdout and "shared/" not in result.stdout


def _corpus_expectations() -> dict[str, str]:
    """test/corpus/expected.py alone (the corpus package builds its model cases on import)."""
    spec = importlib.util.spec_from_file_location(
        "corpus_expected", ROOT / "test" / "corpus" / "expected.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected: dict[str, str] = module.EXPECTED
    return expected


def test_corpus_table_is_what_the_corpus_test_asserts():
    """docs/CORPUS.md's table shows the rows test/test_corpus.py asserts (EXPECTED): the same
    cases, counts, graphs, exactness, and `dynamic=True` column."""
    expected = _corpus_expectations()
    lines = (ROOT / "docs" / "CORPUS.md").read_text().splitlines()
    header = lines.index(next(ln for ln in lines if ln.startswith("| case | dtype |")))
    rows = []
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    def key_of(case: str, dtype: str) -> str:
        # A case run only under dynamic=True shows its dtype as "bf16 (dynamic=True)".
        base, only_dynamic, _ = dtype.partition(" (dynamic=True)")
        return f"{case}/{base}/dynamic" if only_dynamic else f"{case}/{dtype}"

    keys = {key_of(r[0], r[1]) for r in rows}
    assert keys == {k for k in expected
                    if not k.endswith("/dynamic") or k.removesuffix("/dynamic") not in expected}
    for case, dtype, norm, add, act, quant, fused, graphs, _err, exact, dynamic, _note in rows:
        key = key_of(case, dtype)
        if key.endswith("/dynamic"):
            assert dynamic == "-", key
        counts = f"norm {norm} add {add} act {act} quant {quant} fused {fused} graphs {graphs}"
        assert expected[key].startswith(counts + " "), (key, expected[key])
        assert (exact == "yes") == expected[key].endswith(" exact"), key
        if dynamic == "-":
            assert key.endswith("/dynamic") or f"{key}/dynamic" not in expected, key
        elif dynamic == "same":
            assert expected[f"{key}/dynamic"] == expected[key], key
        else:
            assert expected[f"{key}/dynamic"] != expected[key], key
