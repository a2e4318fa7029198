"""The `rocm` provider dialect: compiled HIP kernels for AMD GPUs (vllm_xdsl/backends/rocm)."""

from vllm_xdsl.dialects.provider import define_provider_dialect

Rocm = define_provider_dialect("rocm", ("vec_width", "inplace"))
OPS_BY_NAME = {op.SEMANTIC_NAME: op for op in Rocm.operations}  # type: ignore[attr-defined]
