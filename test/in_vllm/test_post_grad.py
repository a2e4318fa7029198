"""vllm_xdsl.post_grad_pass() inside vLLM's engine (vLLM's default CPU config, where the
pass is the only way in): LLM.generate's greedy tokens equal plain vLLM's, no graph falls
back, the norms, residual adds and activations of a Llama are raised."""

from __future__ import annotations

import gc
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")

import torch  # noqa: E402

import vllm_xdsl  # noqa: E402
from vllm_xdsl.compile import RESULTS  # noqa: E402

PROMPTS = [[1, 5, 9, 17, 33, 65], [2, 4, 8, 16, 32, 64, 128, 200]]
TOKENS = 12


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, head_dim=32,
                         vocab_size=256, max_position_embeddings=256, torch_dtype="bfloat16")
    path = tmp_path_factory.mktemp("llama")
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
    return path


def generate(path: Path, compilation_config: dict[str, Any] | None) -> list[list[int]]:
    from vllm import LLM, SamplingParams, TokensPrompt

    kwargs = {} if compilation_config is None else {"compilation_config": compilation_config}
    llm = LLM(model=str(path), skip_tokenizer_init=True, gpu_memory_utilization=0.1,
              max_model_len=256, seed=0, **kwargs)
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in PROMPTS],
                           SamplingParams(temperature=0.0, max_tokens=TOKENS,
                                          detokenize=False))
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    del llm
    gc.collect()
    return tokens


# Inductor's post-grad graph of vLLM's model takes the attention layer's name as an opaque
# script object, which the importer rejects: the pass leaves every graph unchanged with a
# warning. Strict: passing (the importer carrying opaque values) must remove this mark.
@pytest.mark.xfail(strict=True, reason="the importer rejects FakeScriptObject placeholders")
def test_post_grad_pass_in_llm_generate(checkpoint: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # Fresh compile caches: a graph served from a cache never meets the pass.
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    plain = generate(checkpoint, None)
    mark = len(RESULTS)
    with caplog.at_level(logging.WARNING, logger="vllm_xdsl"):
        ours = generate(checkpoint, {"inductor_compile_config": {
            "post_grad_custom_post_pass": vllm_xdsl.post_grad_pass()}})
    fallbacks = [r.getMessage() for r in caplog.records
                 if r.name == "vllm_xdsl" and r.levelno >= logging.WARNING]
    assert fallbacks == []
    results = RESULTS[mark:]
    assert results, "the pass never ran"
    raised: Counter[str] = Counter()
    for result in results:
        raised.update(next(s for s in result.stages if s.name == "raise-native").op_counts)
    # 2 layers: each an input norm (the first plain, then fused with the residual add),
    # a post-attention fused add+norm and a SiLU-and-mul; the final fused add+norm.
    assert raised["vllm.silu_and_mul"] >= 2, raised
    assert raised["vllm.rms_norm"] + raised["vllm.fused_add_rms_norm"] >= 5, raised
    assert raised["vllm.fused_add_rms_norm"] >= 3, raised
    assert ours == plain
