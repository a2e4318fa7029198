"""The `cuda` provider dialect: compiled CUDA kernels (vllm_xdsl/backends/cuda)."""

from vllm_xdsl.dialects.provider import define_provider_dialect

Cuda = define_provider_dialect("cuda", ("vec_width", "inplace"))
OPS_BY_NAME = {op.SEMANTIC_NAME: op for op in Cuda.operations}  # type: ignore[attr-defined]
