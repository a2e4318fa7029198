"""What `pip install .` ships: the wheel holds the examples, py.typed and the kernel sources,
and an installed wheel finds its examples through `python -m vllm_xdsl.examples`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from vllm_xdsl.examples import example_path, names
from vllm_xdsl.examples.__main__ import main as examples_main

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vllm_xdsl"
_BUILD_JUNK = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the sources (the build writes build/ next to them)."""
    src = tmp_path_factory.mktemp("src")
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(PACKAGE, src / "vllm_xdsl", ignore=_BUILD_JUNK)
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (whl,) = out.glob("vllm_xdsl-*.whl")
    return whl


def _members(whl: Path) -> set[str]:
    with zipfile.ZipFile(whl) as z:
        return set(z.namelist())


def test_wheel_ships_the_examples(wheel: Path):
    bundled = sorted(p.name for p in (PACKAGE / "examples").glob("*.mlir"))
    assert "llama_decoder_layer.mlir" in bundled  # the README's Quick start uses it
    members = _members(wheel)
    for name in bundled:
        assert f"vllm_xdsl/examples/{name}" in members
    assert "vllm_xdsl/examples/__main__.py" in members


def test_wheel_is_typed(wheel: Path):
    assert (PACKAGE / "py.typed").is_file()
    assert "vllm_xdsl/py.typed" in _members(wheel)


def test_wheel_ships_the_kernel_sources(wheel: Path):
    csrc = PACKAGE / "backends" / "cuda" / "csrc"
    sources = sorted(p.name for p in csrc.iterdir() if p.is_file())
    assert "vx_kernels.cu" in sources
    members = _members(wheel)
    missing = [s for s in sources if f"vllm_xdsl/backends/cuda/csrc/{s}" not in members]
    assert not missing, f"kernel sources missing from the wheel: {missing}"


def test_installed_wheel_prints_the_path_of_its_example(wheel: Path, tmp_path: Path):
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-m", "vllm_xdsl.examples", "llama_decoder_layer"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    printed = Path(result.stdout.strip())
    assert printed.is_relative_to(target) and printed.is_file()
    assert printed.read_text() == example_path("llama_decoder_layer").read_text()


def test_examples_lists_every_example(capsys: pytest.CaptureFixture[str]):
    assert examples_main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == names()
    assert all(Path(line.split("\t")[1]).is_file() for line in lines)


def test_example_name_with_or_without_suffix():
    assert example_path("llama_decoder_layer") == example_path("llama_decoder_layer.mlir")


def test_unknown_example_is_one_line(capsys: pytest.CaptureFixture[str]):
    assert examples_main(["no_such_layer"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "unknown example 'no_such_layer'" in err and "llama_decoder_layer" in err


_PROVIDERS_SCRIPT = """
import json
from vllm_xdsl.ops import registry
registry.ensure_loaded()
print(json.dumps({"file": registry.__file__, "checkout": registry.checkout_entry_points(),
                  "providers": sorted(registry.registered_providers()),
                  "rule": registry.property_rule("triton") is not None,
                  "errors": registry.load_errors()}))
"""


def test_installed_wheel_loads_its_providers_from_its_metadata(wheel: Path, tmp_path: Path):
    """Outside a checkout the entry points come from the wheel's metadata alone."""
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("VLLM_XDSL_PRIORITY", None)
    result = subprocess.run([sys.executable, "-c", _PROVIDERS_SCRIPT], capture_output=True,
                            text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    r = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(r["file"]).is_relative_to(target) and r["checkout"] is None
    assert {"cuda", "native", "rocm", "triton"} <= set(r["providers"])
    assert r["rule"] and r["errors"] == []
