"""Our backend inside vLLM's engine never falls back: vLLM's graphs carry opaque values (the
attention layer's name as a hoisted opaque object), mutating custom ops under
auto_functionalized_v2 (attention into a torch.empty buffer, rotary in place), and the
importer carries them through. Per model, `LLM.generate` through
`compilation_config={"mode": 2, "backend": "vllm_xdsl"}`: greedy tokens equal plain vLLM's,
zero fallbacks, and in every compiled graph each norm, residual add and act-and-mul of the
model raised. Engines come from conftest's `vllm_engine` (one fresh process per model and
way, shared with test_engine.py: Llama costs no start of its own here, Gemma2 two, 70-230 s apiece on the loaded CI machine)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("vllm")

from helpers.vllm_models_config import expected_sites

# Llama; Gemma2 (four norms a layer, the (1 + w) weight, GELU-tanh: the mixed-dtype family).
# Each other model costs two engine starts of CI time: bench/vllm_models_table.py runs all 10.
MODELS = ("llama", "gemma2")


def _run(vllm_engine: Any, model: str, way: str) -> dict[str, Any]:
    result: dict[str, Any] = vllm_engine(model, way)
    if "error" in result:
        pytest.fail(f"{model} through {way}: the engine failed: {result['error']}")
    return result


@pytest.mark.parametrize("model", MODELS)
def test_backend_never_falls_back_in_llm_generate(vllm_engine: Any, model: str) -> None:
    ours = _run(vllm_engine, model, "backend")
    assert ours["warnings"] == [] and ours["fallbacks"] == 0, ours["warnings"]
    assert ours["graphs"], "no graph went through our pipeline"
    want = expected_sites(model)
    for graph in ours["graphs"]:
        assert {kind: graph["sites"][kind] for kind in want} == want, graph["raised"]
    assert ours["tokens"] == _run(vllm_engine, model, "plain")["tokens"]
