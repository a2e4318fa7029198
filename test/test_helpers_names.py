"""test/helpers/vllm_engine.py runs as a script (one engine per process), so test/helpers is
the first entry of that process's sys.path: a helper module named like an installed package
(`triton.py` once) hides that package from vLLM and torch there, and every engine fails."""

from __future__ import annotations

import importlib.util
from pathlib import Path

HELPERS = Path(__file__).parent / "helpers"


def test_no_helper_module_shadows_an_installed_package() -> None:
    stems = sorted(p.stem for p in HELPERS.glob("*.py") if p.stem != "__init__")
    assert stems, HELPERS
    shadowing = [s for s in stems if importlib.util.find_spec(s) is not None]
    assert shadowing == [], f"test/helpers modules named like installed packages: {shadowing}"
