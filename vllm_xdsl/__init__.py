"""vllm-xdsl: an MLIR-style compiler on xDSL for LLM inference ops."""
