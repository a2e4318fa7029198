"""A tiny reference interpreter: run a function of `torch.call` ops on tensors.

Tests use it to check that the native decompositions of lower-dispatch compute exactly
what the native functions compute, without the FX exporter. `vllm` ops are run through
their native function (the contract), so a module can be evaluated before and after
lowering; provider ops (`triton.*`, `cuda.*`, `rocm.*`) call the implementation their
provider registered, as is: an in-place implementation really overwrites its inputs,
which is what the in-place tests of lower-dispatch need to observe.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import func
from xdsl.ir import Attribute, SSAValue

from vllm_xdsl.dialects.torch import (
    CallOp,
    resolve_overload,
)
from vllm_xdsl.dialects.torch_literals import to_python


def python_value(attr: Attribute, operands: list[Any]) -> Any:
    """The Python argument an attribute of a torch.call's args/kwargs stands for."""
    return to_python(attr, operands.__getitem__)


def run_call(op: CallOp, operands: list[Any]) -> list[Any]:
    fn = resolve_overload(op.target.data)
    args = [python_value(a, operands) for a in op.args.data]
    kwargs = {k: python_value(v, operands) for k, v in (op.kwargs.data if op.kwargs else {}).items()}
    out = fn(*args, **kwargs)
    return list(out) if isinstance(out, tuple | list) else [out]


def evaluate(function: func.FuncOp, *inputs: Any) -> list[Any]:
    """Run `function`'s body on `inputs`; returns the values of its func.return."""
    from vllm_xdsl import ops
    from vllm_xdsl.dialects.binding import native_args

    block = function.body.block
    env: dict[SSAValue, Any] = dict(zip(block.args, inputs, strict=True))
    for op in block.ops:
        operands = [env[v] for v in op.operands]
        if isinstance(op, func.ReturnOp):
            return operands
        if isinstance(op, CallOp):
            results = run_call(op, operands)
        elif op.name.split(".", 1)[0] in ("vllm", "triton", "cuda", "rocm", "cpu"):
            provider, _, name = op.name.partition(".")
            semantic = ops.ALL_OPS[name]
            fn = semantic.native if provider == "vllm" else semantic.impls()[provider].fn
            out = fn(**native_args(op, env.__getitem__))
            results = list(out) if isinstance(out, tuple) else [out]
            if len(results) > len(op.results):  # a static fused scheme: no scales result
                results = results[: len(op.results)]
        else:
            raise NotImplementedError(f"cannot evaluate {op.name}")
        if len(results) != len(op.results):
            raise ValueError(f"{op.name}: {len(results)} values for {len(op.results)} results")
        env.update(zip(op.results, results, strict=True))
    raise ValueError(f"function {function.sym_name.data} has no func.return")
