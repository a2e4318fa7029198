"""vllm-xdsl: an MLIR-style compiler on xDSL for LLM inference ops."""

from typing import Any


def __getattr__(name: str) -> Any:
    # Loaded on first use: `import vllm_xdsl` stays free of torch and xDSL.
    if name == "post_grad_pass":
        from vllm_xdsl.post_grad import post_grad_pass

        return post_grad_pass
    raise AttributeError(f"module 'vllm_xdsl' has no attribute {name!r}")
