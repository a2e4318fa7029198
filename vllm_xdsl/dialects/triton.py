"""The `triton` provider dialect: Triton kernels generated from the op (vllm_xdsl/backends/triton)."""

from vllm_xdsl.dialects.provider import define_provider_dialect, ops_by_name

Triton = define_provider_dialect("triton", ("block_size", "num_warps"))
OPS_BY_NAME = ops_by_name(Triton)
