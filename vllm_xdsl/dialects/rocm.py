"""The `rocm` provider dialect: compiled HIP kernels for AMD GPUs (vllm_xdsl/backends/rocm)."""

from vllm_xdsl.dialects.provider import define_provider_dialect, ops_by_name

Rocm = define_provider_dialect("rocm", ("vec_width", "inplace"))
OPS_BY_NAME = ops_by_name(Rocm)
