"""The `raise-native` pass (raise_native.py) and its patterns: torch decompositions and
vLLM's own spellings -> the semantic ops of the `vllm` dialect, one module per family."""
