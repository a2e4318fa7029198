"""Small bundled models written the way model code writes them (HF style), for the demo
and the backend tests: random weights, nothing downloaded."""

from vllm_xdsl.models.llama import (
    DecoderConfig,
    DecoderLayer,
    Fp8Linear,
    GemmaRMSNorm,
    LlamaRMSNorm,
    Mlp,
    TinyDecoder,
)

__all__ = [
    "DecoderConfig",
    "DecoderLayer",
    "Fp8Linear",
    "GemmaRMSNorm",
    "LlamaRMSNorm",
    "Mlp",
    "TinyDecoder",
]
