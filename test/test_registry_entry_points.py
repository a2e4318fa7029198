"""Built-in providers and the tuner attach through `vllm_xdsl.providers` entry points,
as out-of-tree providers do: the table in pyproject.toml is what the registry loads."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import tomllib
import torch

from vllm_xdsl import ops
from vllm_xdsl.ops import dispatch, registry

ROOT = Path(__file__).resolve().parents[1]


def _table() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["entry-points"][registry.ENTRY_POINT_GROUP]


def test_pyproject_registers_the_builtin_providers_and_the_tuner():
    table = _table()
    assert set(table) >= {"triton", "cuda", "rocm", "tune"}
    eps = registry.checkout_entry_points(ROOT)
    assert eps is not None
    assert {(ep.name, ep.value) for ep in eps} == set(table.items())


def test_loading_them_registers_providers_rules_and_hooks():
    registry.ensure_loaded()
    assert registry.load_errors() == []
    assert {"triton", "cuda", "rocm"} <= registry.registered_providers()
    for provider in ("triton", "cuda", "rocm"):
        assert registry.property_rule(provider) is not None, provider
    assert dispatch._auto_hooks is not None  # installed by the tuner's entry point


def test_property_rules_are_the_launchers_rules():
    triton = registry.property_rule("triton")
    cuda = registry.property_rule("cuda")
    assert triton is not None and cuda is not None
    assert triton(op="rms_norm", dtype=torch.bfloat16, width=4096, scheme=None) == {
        "block_size": 4096, "num_warps": 8}
    assert cuda(op="rms_norm", dtype=torch.bfloat16, width=4096, scheme=None) == {
        "vec_width": 8}
    assert cuda(op="rms_norm", dtype=torch.float32, width=4096, scheme=None) == {
        "vec_width": 4}
    assert cuda(op="rms_norm", dtype=torch.bfloat16, width=4100, scheme=None) == {
        "vec_width": 4}  # halved until it divides the row


def test_checkout_entry_points_only_for_this_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "vllm_xdsl"\n'
        '[project.entry-points."vllm_xdsl.providers"]\nx = "m:f"\n')
    [ep] = registry.checkout_entry_points(tmp_path) or []
    assert (ep.name, ep.value, ep.group) == ("x", "m:f", registry.ENTRY_POINT_GROUP)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert registry.checkout_entry_points(tmp_path) is None
    assert registry.checkout_entry_points(tmp_path / "missing") is None
    (tmp_path / "pyproject.toml").write_text("not toml [")
    assert registry.checkout_entry_points(tmp_path) is None


def test_installed_metadata_of_this_package_yields_to_the_checkout(monkeypatch, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "vllm-xdsl"\n'
        '[project.entry-points."vllm_xdsl.providers"]\nnew = "m:new"\n')
    stale = SimpleNamespace(name="old", value="m:old", dist=SimpleNamespace(name="vllm_xdsl"))
    other = SimpleNamespace(name="oot", value="o:f", dist=SimpleNamespace(name="oot-dist"))
    monkeypatch.setattr(registry, "entry_points", lambda group: [stale, other])
    real = registry.checkout_entry_points
    monkeypatch.setattr(registry, "checkout_entry_points", lambda: real(tmp_path))
    assert [ep.name for ep in registry.provider_entry_points()] == ["new", "oot"]
    # Installed from a wheel (no checkout): this package's metadata is the table.
    monkeypatch.setattr(registry, "checkout_entry_points", lambda: None)
    assert [ep.name for ep in registry.provider_entry_points()] == ["old", "oot"]


def test_auto_without_a_tuner_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(dispatch, "_auto_hooks", None)
    monkeypatch.setattr(registry, "_loaded", True)  # nothing more to load
    meta = ops.meta_args("rms_norm", (torch.ones(2, 8), None, 1e-6))
    with pytest.raises(ops.DispatchError, match=r"rms_norm: priority 'auto' \(explicit\) "
                                                r"needs the tuner \(vllm_xdsl.tune\)"):
        dispatch.auto_table("rms_norm", meta, "rms_norm=auto", "cpu")
    with pytest.raises(ops.DispatchError, match="needs the tuner"):
        ops.select("rms_norm", meta, "rms_norm=auto", "cpu")
