"""A VLLM_XDSL_CACHE_DIR that cannot be used (a file, a path under a file, a place that
cannot be written): one line that names the variable, never a traceback, no lost data.

Tests run as root here, so "read-only" is simulated by a path under a regular file (mkdir
fails) or by a failing open (the lock, the log, the library)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from vllm_xdsl import ops, user_cache
from vllm_xdsl.backends.cuda import build as B
from vllm_xdsl.ops import TensorMeta
from vllm_xdsl.tune import Table, cache, tuner
from vllm_xdsl.tune.__main__ import main as tune_main

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the emul build needs g++")


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "cache"
    path.write_text("not a directory")
    return path


@needs_gxx
@pytest.mark.parametrize("where, why", [
    ("{file}", "it exists and is not a directory"),
    ("{file}/sub", "Not a directory"),
])
def test_build_cli_one_line(a_file: Path, where: str, why: str) -> None:
    value = where.format(file=a_file)
    env = {**os.environ, "VLLM_XDSL_CACHE_DIR": value}
    run = subprocess.run([sys.executable, "-m", "vllm_xdsl.backends.cuda.build", "emul"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr == f"error: VLLM_XDSL_CACHE_DIR={value} is not a writable directory ({why})\n"
    assert a_file.read_text() == "not a directory"


def test_default_cache_dir_names_the_variable(monkeypatch: pytest.MonkeyPatch, a_file: Path) -> None:
    monkeypatch.delenv("VLLM_XDSL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(a_file))
    with pytest.raises(user_cache.CacheDirError) as info:
        user_cache.ensure_cache_dir()
    assert str(info.value) == (f"the cache directory {a_file}/vllm_xdsl (set VLLM_XDSL_CACHE_DIR "
                               "to use another) is not a writable directory (Not a directory)")


@needs_gxx
def test_unwritable_lock_is_a_build_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The directory exists but nothing can be written in it: BuildError (which the kernel
    wrappers report with the op that needed the build), not a PermissionError."""
    monkeypatch.setenv("VLLM_XDSL_CACHE_DIR", str(tmp_path / "ro"))
    real_open = open

    def read_only(path, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        if str(path).startswith(str(tmp_path / "ro")):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", read_only)
    with pytest.raises(B.BuildError) as info:
        B.build_library("emul", ("warp32",))
    assert str(info.value) == (f"VLLM_XDSL_CACHE_DIR={tmp_path / 'ro'} is not a writable "
                               "directory (Permission denied)")


def test_tune_cache_save_warns_and_keeps_entries(monkeypatch: pytest.MonkeyPatch, a_file: Path) -> None:
    monkeypatch.setenv("VLLM_XDSL_CACHE_DIR", str(a_file))
    monkeypatch.delenv("VLLM_XDSL_TUNE_TABLE", raising=False)
    Table.forget()
    table = Table.of("cpu")  # reading a cache under a file: no cache, no error
    assert table.entries == {}
    monkeypatch.setattr(cache, "_warned", set())
    with pytest.warns(RuntimeWarning) as record:
        cache.save("cpu", {"k": {"winner": "native"}})
        cache.save("cpu", {"k2": {"winner": "native"}})
    assert [str(w.message) for w in record] == [
        f"vllm_xdsl: tuning results not saved: VLLM_XDSL_CACHE_DIR={a_file} is not a writable "
        "directory (it exists and is not a directory); they hold for this process only"]
    Table.forget()


def test_tune_cli_fails_before_measuring(monkeypatch: pytest.MonkeyPatch, a_file: Path,
                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VLLM_XDSL_CACHE_DIR", str(a_file / "sub"))
    monkeypatch.delenv("VLLM_XDSL_TUNE_TABLE", raising=False)
    ir = tmp_path / "m.mlir"
    ir.write_text(
        "func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {\n"
        "  %y = vllm.rms_norm %x {epsilon = 1.0e-06 : f64} : tensor<?x64xf32> -> tensor<?x64xf32>\n"
        "  func.return %y : tensor<?x64xf32>\n}\n")
    measured = tuner.STATS.measured
    assert tune_main([str(ir), "--target", "cpu", "--max-tokens", "1"]) == 1
    err = capsys.readouterr().err
    assert err == (f"vllm_xdsl.tune: error: VLLM_XDSL_CACHE_DIR={a_file / 'sub'} is not a "
                   "writable directory (Not a directory)\n")
    assert tuner.STATS.measured == measured
    assert ops.select("rms_norm", {"x": TensorMeta(torch.float32, (2, 64), "cpu"),
                                   "weight": None, "epsilon": 1e-6}, None, "cpu").provider
