"""register(): every Triton launcher as provider "triton" of its semantic op.

Available where Triton is importable. Arguments are accepted on cuda devices (CUDA and
ROCm builds of torch both say "cuda"; lower-dispatch may say "rocm"), and on the CPU only
inside Triton's interpreter (TRITON_INTERPRET=1), which is how the CPU tests run them.
Importing this module never imports Triton (it is an optional extra).
"""

from __future__ import annotations

import os
from typing import Any

from vllm_xdsl.backends.triton.spec import (
    ACT_DTYPES,
    QUANT_OPS,
    SPARSE_ACT_OPS,
    default_block_size,
    default_num_warps,
    variant_fields,
)
from vllm_xdsl.core.variant import variant_problem_beyond
from vllm_xdsl.ops.activations import ACTIVATIONS, FUSED_ACT_OPS, activation_of
from vllm_xdsl.ops.impl import TensorMeta

PROVIDER = "triton"
# Rows wider than this would need a looped kernel where one BLOCK covers a whole row (the
# kernels that reduce over rows); tiled kernels take any width.
MAX_ROW = 65536
_GPU_DEVICES = ("cuda", "rocm")
_registered = False


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def available(target: str | None = None) -> bool | str:
    """True if Triton kernels for `target` can be built here, else why not.

    cuda/rocm need only Triton (lower-dispatch may compile for a GPU this machine lacks);
    the cpu target needs Triton's interpreter.
    """
    from vllm_xdsl.backends.triton.compile import triton_problem

    problem = triton_problem()
    if problem is None and target == "cpu" and not interpreting():
        problem = "the cpu target needs Triton's interpreter (TRITON_INTERPRET=1)"
    return problem or True


def _device_problem(metas: list[TensorMeta]) -> str | None:
    devices = {m.device for m in metas}
    if len(devices) > 1:
        return f"tensors on different devices {sorted(devices)}"
    (device,) = devices
    if device in _GPU_DEVICES:
        return None
    if device == "cpu":
        return (
            None if interpreting() else "CPU tensors need Triton's interpreter (TRITON_INTERPRET=1)"
        )
    return f"tensors on {device!r}; Triton runs on cuda/rocm (or the CPU interpreter)"


def _tiled(op: str, args: dict[str, Any]) -> bool:
    """Whether the op's kernel splits rows into column tiles (spec.tileable)."""
    if op in ACTIVATIONS:
        return True
    if op in QUANT_OPS:  # its form: static, or per group
        _, static, granularity = QUANT_OPS[op]
        return static or granularity == "group"
    return op in FUSED_ACT_OPS and (args["static"] or args["granularity"] == "group")


def _row_problem(m: TensorMeta, what: str, width_of: int = 1, tiled: bool = False) -> str | None:
    if m.dtype not in ACT_DTYPES:
        return f"{what} dtype {m.dtype} is not f16, bf16 or f32"
    if m.ndim == 0 or m.shape[-1] is None:
        return f"{what} needs a static last dimension"
    if not tiled and m.shape[-1] // width_of > MAX_ROW:
        return f"rows of {m.shape[-1] // width_of} columns exceed the one-block limit {MAX_ROW}"
    return None


def _agree(a: TensorMeta, b: TensorMeta) -> bool:
    """Same rank, each dim equal or unknown (None) in either."""
    return a.ndim == b.ndim and all(
        p is None or q is None or p == q for p, q in zip(a.shape, b.shape, strict=True)
    )


def _group_problem(granularity: str, group_size: int) -> str | None:
    if granularity == "group" and group_size & (group_size - 1):
        return f"group_size {group_size} is not a power of two"
    return None


def supports_args(op: str, **args: Any) -> bool | str:
    """Whether the Triton kernel of `op` runs these arguments (tensors as TensorMeta)."""
    metas = [v for v in args.values() if isinstance(v, TensorMeta)]
    problem = (_device_problem(metas)
               or variant_problem_beyond(args, "triton", variant_fields(op, args)))
    x = args["x"]
    act_and_mul = activation_of(op) is not None or op in SPARSE_ACT_OPS
    halves = act_and_mul and args.get("up") is None  # x = [gate | up]
    problem = problem or _row_problem(x, "x", 2 if halves else 1, _tiled(op, args))
    up = args.get("up")
    if problem is None and up is not None and (up.dtype != x.dtype or not _agree(up, x)):
        problem = f"up {up.dtype} {up.shape} differs from x {x.dtype} {x.shape}"
    w = args.get("weight")
    if problem is None and w is not None:
        if w.dtype not in ACT_DTYPES:
            problem = f"weight dtype {w.dtype} is not f16, bf16 or f32"
        elif w.shape != (x.shape[-1],):
            problem = f"weight shape {w.shape} is not [{x.shape[-1]}]"
    r = args.get("residual")
    if problem is None and r is not None and r.dtype not in ACT_DTYPES:
        problem = f"residual dtype {r.dtype} is not f16, bf16 or f32"
    if problem is None and op in QUANT_OPS:
        problem = _group_problem(QUANT_OPS[op][2], args.get("group_size", 0))
    if problem is None and "granularity" in args:
        problem = _group_problem(args["granularity"], args["group_size"])
    return problem or True


def launch_properties(op: str, dtype: Any, width: int, scheme: Any) -> dict[str, int]:
    """block_size and num_warps of the kernel for rows of `width` (the launcher's rules),
    recorded by lower-dispatch on `triton.<op>` (ops.registry.PropertyRule)."""
    block = default_block_size(op, scheme, width)
    return {"block_size": block, "num_warps": default_num_warps(block)}


def register() -> None:
    """Register every launcher as provider "triton" (idempotent)."""
    global _registered
    if _registered:
        return
    from vllm_xdsl import ops
    from vllm_xdsl.backends.triton.functions import FUNCTIONS

    for name, fn in FUNCTIONS.items():

        def check(_op: str = name, **args: Any) -> bool | str:
            return supports_args(_op, **args)

        ops.ALL_OPS[name].register_impl(PROVIDER, supported=available, supports_args=check)(fn)
    ops.registry.register_property_rule(PROVIDER, launch_properties)
    _registered = True
