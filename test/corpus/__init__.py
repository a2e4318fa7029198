"""A real-model corpus: code nobody here wrote, compiled with `backend="vllm_xdsl"`.

Per model (HF transformers with tiny random configs, compressed-tensors presets on a tiny
Llama, vLLM's native forms), dtype and kind of dynamic shapes (the token dim marked, or
`dynamic=True`) it counts the sites of each type (norm, residual add,
act-and-mul, quant, and the norm->quant / act->quant pairs a fusion could cover), how many
the pipeline raised and fused, and the error of the compiled model against eager.

    from corpus import CASES, measure
    row = measure(CASES["llama/bf16"])  # or "llama/bf16/dynamic"

Used by test/test_corpus.py (exact expectations, corpus/expected.py) and by
bench/corpus_table.py (the table in docs/CORPUS.md).
"""

from corpus.cases import BOTH_SHAPES, CASES, Case
from corpus.harness import Row, measure
from corpus.sites import Sites

__all__ = ["BOTH_SHAPES", "CASES", "Case", "Row", "Sites", "measure"]
