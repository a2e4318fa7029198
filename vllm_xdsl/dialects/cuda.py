"""The `cuda` provider dialect: compiled CUDA kernels (vllm_xdsl/backends/cuda)."""

from vllm_xdsl.dialects.provider import define_provider_dialect, ops_by_name

Cuda = define_provider_dialect("cuda", ("vec_width", "inplace"))
OPS_BY_NAME = ops_by_name(Cuda)
