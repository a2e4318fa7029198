"""The `cpu` provider dialect: the host build of the CUDA kernel family (vllm_xdsl/backends/cpu)."""

from vllm_xdsl.dialects.provider import define_provider_dialect, ops_by_name

Cpu = define_provider_dialect("cpu", ("inplace",))
OPS_BY_NAME = ops_by_name(Cpu)
