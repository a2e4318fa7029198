"""Each catalog spec agrees with its native function's signature, and ops/ is built from it."""

from __future__ import annotations

import inspect
import types
import typing

import pytest
import torch

from vllm_xdsl import ops
from vllm_xdsl.core import catalog
from vllm_xdsl.core.dtypes import DType
from vllm_xdsl.ops.activations import ACTIVATIONS, FUSED_ACT_OPS
from vllm_xdsl.ops.op import resolve_native

_KIND_OF = {float: "float", int: "int", bool: "bool", str: "str", torch.dtype: "dtype",
            torch.Tensor: "tensor"}


def _kind_and_optional(annotation: object) -> tuple[str, bool]:
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    if args:
        rest = [a for a in args if a is not type(None)]
        assert len(rest) == 1, annotation
        return _KIND_OF[rest[0]], type(None) in args
    return _KIND_OF[annotation], False  # type: ignore[index]


def _default(p: inspect.Parameter) -> object:
    if p.default is inspect.Parameter.empty:
        return catalog.REQUIRED
    if isinstance(p.default, torch.dtype):
        return DType.of(p.default)
    return p.default


@pytest.mark.parametrize("name", list(catalog.SPECS))
def test_spec_matches_native_signature(name: str) -> None:
    spec = catalog.SPECS[name]
    native = resolve_native(spec)
    params = list(inspect.signature(native).parameters.values())
    assert tuple(p.name for p in params) == spec.param_names
    for p, declared in zip(params, spec.params, strict=True):
        kind, optional = _kind_and_optional(p.annotation)
        assert (kind, optional) == (declared.kind, declared.optional), p.name
        assert _default(p) == declared.default, p.name


@pytest.mark.parametrize("name", list(catalog.SPECS))
def test_semantic_op_is_built_from_its_spec(name: str) -> None:
    spec, op = catalog.SPECS[name], ops.ALL_OPS[name]
    assert op.spec is spec and op.native is resolve_native(spec)
    assert op.outputs == spec.result_names and op.fused == spec.fused
    assert op.inplace_outputs == dict(spec.inplace)


def test_op_lists_and_tables_come_from_the_catalog() -> None:
    assert ops.UNFUSED == tuple(s.name for s in catalog.UNFUSED_SPECS)
    assert ops.FUSED == tuple(s.name for s in catalog.FUSED_SPECS)
    assert set(ops.ALL_OPS) == set(catalog.SPECS)
    assert ACTIVATIONS == {"silu_and_mul": "silu", "gelu_and_mul": "gelu",
                           "gelu_tanh_and_mul": "gelu_tanh", "fatrelu_and_mul": "fatrelu"}
    assert FUSED_ACT_OPS == ("silu_and_mul_quant", "gelu_and_mul_quant",
                             "gelu_tanh_and_mul_quant")
    for spec in catalog.FUSED_SPECS:
        assert spec.producer in ops.UNFUSED and set(spec.quants) <= set(ops.UNFUSED)
        assert catalog.fused_of(spec.producer) is spec


def test_inconsistent_spec_is_reported() -> None:
    bad = catalog.OpSpec("bad", "norm", (catalog.Param("x", "tensor", default=None),
                                         catalog.Param("epsilon", "float")),
                         (catalog.Result("out"),), "m:f")
    assert "without a default" in (bad.problem() or "")
    bad_inplace = catalog.OpSpec("bad", "norm", (catalog.Param("x", "tensor"),),
                                 (catalog.Result("out"),), "m:f", inplace=(("y", "x"),))
    assert "in-place" in (bad_inplace.problem() or "")
