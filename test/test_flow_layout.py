"""The Layout of docs/ARCHITECTURE.md names every package and top-level module of vllm_xdsl,
and nothing that is gone: a reader looking for where something lives starts there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "vllm_xdsl"
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"


def _layout_block() -> str:
    text = ARCHITECTURE.read_text()
    start = text.index("## Layout\n")
    fence = text.index("```\n", start) + 4
    return text[fence:text.index("```\n", fence)]


def _existing() -> set[str]:
    packages = {p.name + "/" for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.name for p in ROOT.glob("*.py") if p.name != "__init__.py"}
    return packages | modules


def _named(block: str) -> set[str]:
    """Every `vllm_xdsl/<name>` the block names, and the sibling modules it names beside
    one (`its options: backend_options.py`)."""
    names = set(re.findall(r"^vllm_xdsl/([\w.]+/?)", block, re.MULTILINE))
    names |= {m for m in re.findall(r"\b(\w+\.py)\b", block) if (ROOT / m).is_file()}
    return names


def test_layout_names_every_package_and_module() -> None:
    named = _named(_layout_block())
    assert not _existing() - named, f"docs/ARCHITECTURE.md Layout misses {sorted(_existing() - named)}"


def test_layout_names_nothing_that_does_not_exist() -> None:
    named = {n for n in re.findall(r"^vllm_xdsl/([\w.]+/?)", _layout_block(), re.MULTILINE)}
    assert not named - _existing(), f"docs/ARCHITECTURE.md Layout names {sorted(named - _existing())}"
