"""A tiny evaluator of `func.func` bodies of `vllm` and torch ops, for the fuse-norm-quant tests
(no exporter needed).

`vllm` ops run through their native function (the contract, `ops.ALL_OPS[name].native`);
`torch.call` ops through the torch overload they name. Arguments of a native are found by
name: operands of the op, `epsilon` (property or runtime operand), the quant dtype from the
`q` result type, and scheme fields from the op's `quant_scheme()`.
"""

from __future__ import annotations

from typing import Any

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from vllm_xdsl.backends.torch_export.literals import python_value
from vllm_xdsl.dialects import make_context
from vllm_xdsl.dialects.torch import (
    CallOp,
    GetAttrOp,
    resolve_overload,
)
from vllm_xdsl.dialects.types import torch_dtype
from vllm_xdsl.dialects.vllm import SemanticSignature, has_rounded_sum
from vllm_xdsl.ops import ALL_OPS


def parse(text: str) -> ModuleOp:
    from xdsl.parser import Parser

    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def _python(attr: Attribute, inputs: list[Any]) -> Any:
    """A literal argument's Python value, as the exporter reads it."""
    return python_value(attr, inputs.__getitem__)


def _scheme_args(op: Operation) -> dict[str, Any]:
    if not hasattr(op, "quant_scheme"):
        return {}
    s = op.quant_scheme()  # type: ignore[attr-defined]
    return {"quant_dtype": s.dtype, "fp8_dtype": s.dtype, "static": s.static,
            "granularity": s.granularity, "group_size": s.group_size,
            "column_major_scales": s.column_major_scales, "use_ue8m0": s.use_ue8m0,
            "eps": s.group_eps, "group_eps": s.group_eps, "variant": s.variant.spelling()}


def _run_vllm(op: SemanticSignature, env: dict[SSAValue, Any]) -> None:
    sem = ALL_OPS[op.SEMANTIC_NAME]
    derived = _scheme_args(op)
    kwargs: dict[str, Any] = {}
    for name in sem.signature.parameters:
        if name == "epsilon":
            eps = op.epsilon_float()
            kwargs[name] = float(env[op.epsilon_value]) if eps is None else eps  # type: ignore[attr-defined]
        elif name == "variance_size":
            prop = op.variance_size  # type: ignore[attr-defined]
            kwargs[name] = None if prop is None else prop.value.data
        elif name == "rounded_sum":
            kwargs[name] = has_rounded_sum(op)
        elif name in derived:
            kwargs[name] = derived[name]
        else:
            value = getattr(op, name)
            kwargs[name] = None if value is None else env[value]
    outs = sem.native(**kwargs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    for name, value in zip(sem.outputs, outs, strict=True):
        result = getattr(op, name, None)
        if result is not None:
            env[result] = value


def run(fn: func.FuncOp, args: list[Any], constants: dict[str, Any] | None = None) -> list[Any]:
    """Evaluate `fn` on `args`; `constants` holds the values of `torch.get_attr` names."""
    env: dict[SSAValue, Any] = dict(zip(fn.args, args, strict=True))
    for op in fn.body.ops:
        if isinstance(op, func.ReturnOp):
            return [env[v] for v in op.operands]
        if isinstance(op, GetAttrOp):
            env[op.result] = (constants or {})[op.attr_name.data]
        elif isinstance(op, CallOp):
            inputs = [env[v] for v in op.inputs]
            pos = [_python(a, inputs) for a in op.args.data]
            kw = {} if op.kwargs is None else {
                k: _python(v, inputs) for k, v in op.kwargs.data.items()}
            out = resolve_overload(op.target.data)(*pos, **kw)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            env.update(zip(op.outputs, outs, strict=True))
        elif isinstance(op, SemanticSignature):
            _run_vllm(op, env)
        else:
            raise NotImplementedError(f"cannot evaluate {op.name}")
    raise ValueError(f"{fn.sym_name.data} has no func.return")


def random_args(fn: func.FuncOp, dynamic: int, seed: int = 0) -> list[torch.Tensor]:
    """Random inputs for `fn` by argument type: `?` dims become `dynamic`, [1] tensors are
    positive scales, 0-d f64 tensors an epsilon."""
    gen = torch.Generator().manual_seed(seed)
    args = []
    for arg in fn.args:
        t = arg.type
        assert isinstance(t, TensorType)
        shape = [dynamic if d < 0 else d for d in t.get_shape()]
        dtype = torch_dtype(t.element_type)
        if not shape:
            args.append(torch.tensor(1e-6, dtype=dtype))
        elif shape == [1]:
            args.append((torch.rand(1, generator=gen) * 0.05 + 0.01).to(dtype))
        else:
            args.append((torch.randn(shape, generator=gen) * 2).to(dtype))
    return args


def count_ops(module: ModuleOp) -> dict[str, int]:
    """Op name (torch.call: its target) -> count."""
    counts: dict[str, int] = {}
    for op in module.walk():
        key = op.target.data if isinstance(op, CallOp) else op.name
        counts[key] = counts.get(key, 0) + 1
    return counts
