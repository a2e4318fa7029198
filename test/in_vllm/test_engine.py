"""Our compiler inside vLLM's engine, through both ways in, on a tiny random Llama:
`LLM.generate`'s greedy tokens equal plain vLLM's, no graph falls back (the importer
carries vLLM's opaque values: the attention layer's name as a script object) and every
norm, residual add and act-and-mul site is raised. Four engine starts in all (plain, the
backend under mode 2, the post-grad pass in vLLM's default CPU config, and the backend with
vLLM IR's torch wrap on, whose graph spells the norms as `torch.ops.vllm_ir.*` nodes), each
in a fresh process with empty caches (conftest.py). The post-grad pass with the wrap on
(test/helpers/vllm_engine.py's `post_grad_ir`) sees the same ops under `auto_functionalized`, the
form the main suite tests (test_raise_vllm.py); it costs one more start, so it is run from
bench/vllm_models_table.py, not here."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("vllm")

from helpers.vllm_engine import PROMPTS
from helpers.vllm_models_config import expected_sites

MODEL = "llama"
WAYS_IN = ("backend", "post_grad", "backend_ir")
TOKENS = 8  # run_engine's default: ignore_eos, so every prompt gets all of them


def _run(vllm_engine: Any, way: str) -> dict[str, Any]:
    result: dict[str, Any] = vllm_engine(MODEL, way)
    if "error" in result:
        pytest.fail(f"{MODEL} through {way}: the engine failed: {result['error']}")
    return result


def test_plain_vllm_generates(vllm_engine: Any) -> None:
    plain = _run(vllm_engine, "plain")
    assert [len(t) for t in plain["tokens"]] == [TOKENS] * len(PROMPTS)
    # Plain vLLM never calls our compiler.
    assert plain["graphs"] == [] and plain["warnings"] == []


@pytest.mark.parametrize("way", WAYS_IN)
def test_tokens_equal_plain_vllm(vllm_engine: Any, way: str) -> None:
    ours = _run(vllm_engine, way)
    # The compiler was called on vLLM's graphs: it compiled them or fell back on them.
    assert ours["graphs"] or ours["fallbacks"], ours
    assert ours["tokens"] == _run(vllm_engine, "plain")["tokens"]


@pytest.mark.parametrize("way", WAYS_IN)
def test_no_graph_falls_back(vllm_engine: Any, way: str) -> None:
    ours = _run(vllm_engine, way)
    # No warning of ours at all: a fallback is one.
    assert ours["warnings"] == [], ours["warnings"]
    assert ours["fallbacks"] == 0 and ours["graphs"]


@pytest.mark.parametrize("way", WAYS_IN)
def test_every_site_raised(vllm_engine: Any, way: str) -> None:
    """Each graph vLLM compiled is the whole model: every site of the model in it."""
    ours = _run(vllm_engine, way)
    want = expected_sites(MODEL)
    assert ours["graphs"], "no graph was compiled by our pipeline"
    for graph in ours["graphs"]:
        got = {kind: graph["sites"][kind] for kind in want}
        assert got == want, graph["raised"]
