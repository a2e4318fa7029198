"""Our backend inside vLLM's engine never falls back: vLLM's graphs carry opaque values (the
attention layer's name as a hoisted opaque object), mutating custom ops under
auto_functionalized_v2 (attention into a torch.empty buffer, rotary in place) and the
importer carries them through. Per model, `LLM.generate` through
`compilation_config={"mode": 2, "backend": "vllm_xdsl"}`: greedy tokens equal plain vLLM's,
zero fallbacks, every graph through our pipeline, and the norms, residual adds and
act-and-muls raised, counted from the Hugging Face model the checkpoint was saved from.
Two engine starts per model (about 70-230 s each on the loaded 2-core CI machine)."""

from __future__ import annotations

import gc
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from vllm_models_config import write_checkpoint  # noqa: E402

from vllm_xdsl.compile import FALLBACKS, RESULTS  # noqa: E402

PROMPTS = [[1, 5, 9, 17, 33, 65], [2, 4, 8, 16, 32, 64, 128, 200]]
TOKENS = 12
MODELS = ("llama", "qwen3", "gemma2")


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


def model_sites(path: Path) -> tuple[int, int, int]:
    """(norms, residual adds, act-and-muls) of the checkpoint's model: one norm per RMSNorm
    module (each runs once a forward), two residual adds per decoder layer, one
    act-and-mul per MLP."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_config(config)
    names = [type(m).__name__ for m in model.modules()]
    norms = sum(n.endswith("RMSNorm") for n in names)
    mlps = sum(n.endswith("MLP") for n in names)
    return norms, 2 * config.num_hidden_layers, mlps


@pytest.mark.parametrize("model", MODELS)
def test_backend_in_llm_generate_never_falls_back(model: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # Fresh compile caches: a graph served from a cache never meets the backend.
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    path = write_checkpoint(model, tmp_path / model)
    plain = generate(path, None)
    mark, fallbacks = len(RESULTS), len(FALLBACKS)
    ours = generate(path, {"mode": 2, "backend": "vllm_xdsl"})
    assert [(f.stage, f.error) for f in FALLBACKS[fallbacks:]] == []
    results = RESULTS[mark:]
    assert results, "no graph went through the pipeline"
    raised: Counter[str] = Counter()
    for result in results:
        raised.update(next(s for s in result.stages if s.name == "raise-native").op_counts)
    norms, residuals, acts = model_sites(path)
    assert raised["vllm.rms_norm"] + raised["vllm.fused_add_rms_norm"] == norms, raised
    assert raised["vllm.fused_add_rms_norm"] == residuals, raised
    assert sum(n for op, n in raised.items() if op.endswith("_and_mul")) == acts, raised
    assert ours == plain
