"""raise-native reads a vLLM op's arguments by the schema registered in the process that
traced the graph (vllm_schemas.spelling): vLLM's CPU build names the written output of its
int8 quants `out` where the fallback record (CUDA build) says `result`. Its oneDNN int8 path
passes a 0-d static scale (`input_scale.max()`), and torch 2.13's auto_functionalized_v2
marks a written argument that aliases its whole base with `_<name>_alias`.

The CPU-spelled stand-ins cannot share a process with vllm_standins.py's (one op name, one
schema): that part runs in a child process (this file as a script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.vllm_cpu_int8 import CPU_SCHEMAS, STATIC, compiled, register_cpu_standins

from vllm_xdsl.transforms.raising import vllm_schemas as schemas


def _parse(text: str) -> object:
    return torch._C.parse_schema(f"_C::{text}")


def test_registered_names_map_onto_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schemas, "installed", lambda name: _parse(CPU_SCHEMAS[STATIC]))
    sp = schemas.spelling(STATIC)
    assert sp is not None
    assert sp.names() == ["out", "input", "scale", "azp"] and sp.written() == ["out"]
    assert sp.canonical == {"out": "result", "input": "input", "scale": "scale", "azp": "azp"}


def test_a_registered_schema_of_another_shape_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    other = "static_scaled_int8_quant(Tensor! out, Tensor input, Tensor scale) -> ()"
    monkeypatch.setattr(schemas, "installed", lambda name: _parse(other))
    assert schemas.spelling(STATIC) is None


def test_without_a_registered_schema_the_fallback_spells(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schemas, "installed", lambda name: None)
    sp = schemas.spelling(STATIC)
    assert sp is not None and sp.written() == ["result"]


def test_installed_reads_the_registry_and_skips_stubs() -> None:
    lib = torch.library.Library("vllm_xdsl_spelling_test", "FRAGMENT")
    lib.define("stub() -> ()")
    lib.define("real(Tensor! out, Tensor x) -> ()")
    assert schemas.installed("vllm_xdsl_spelling_test::stub") is None
    real = schemas.installed("vllm_xdsl_spelling_test::real")
    assert real is not None and [a.name for a in real.arguments] == ["out", "x"]
    assert schemas.installed("vllm_xdsl_spelling_test::absent") is None


def test_cpu_build_int8_forms_raised_fused_and_exact() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for key, r in results.items():
        # norm -> quant fused, quant of the attention-like input raised alone
        assert r["raised"] == {"vllm.rms_norm": 1, r["quant"]: 2}, (key, r)
        assert r["fused"] == {"vllm.rms_norm_quant": 1, r["quant"]: 1}, (key, r)
        assert r["kernel_calls"] == 0, (key, r)
        assert r["aliased"] == key.endswith("v2"), (key, r)
        assert r["equal"], (key, r)


# --- the child: CPU-spelled stand-ins, vLLM's oneDNN int8 forms ------------------------


def _child() -> None:
    register_cpu_standins()
    g = torch.Generator().manual_seed(0)
    x, attn = (torch.randn(9, 136, generator=g).to(torch.bfloat16) for _ in range(2))
    w = torch.rand(136, generator=g).to(torch.bfloat16) + 0.5
    results = {}
    for static in (True, False):
        for v2 in (True, False):
            scale = torch.tensor(0.03) if static else None  # 0-d: input_scale.max()
            seen = compiled((x, w, attn), scale, v2)
            seen["quant"] = ("vllm.static_scaled_int8_quant" if static
                             else "vllm.dynamic_per_token_scaled_int8_quant")
            results[f"{'static' if static else 'dynamic'}-{'v2' if v2 else 'v1'}"] = seen
    print(json.dumps(results))


if __name__ == "__main__":
    _child()
