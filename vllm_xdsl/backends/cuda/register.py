"""register(): the compiled kernels as provider "cuda" (and, through rocm/register.py, "rocm";
through backends/cpu, "cpu": the same launchers built for the host).

Supported only where torch drives that vendor's GPU and the compiler (nvcc / hipcc) is
installed; otherwise the reason says which is missing. Argument checks see TensorMeta only
(eager and lower-dispatch alike). An op with an `<op>_inplace` launcher (torch_ops.py:
fused_add_rms_norm and its fused quant) is registered in place (inplace=True): the
dispatcher clones the donated inputs unless the caller (the lowering's proof, or
maybe_inplace) gives them up.
"""

from __future__ import annotations

from typing import Any

import torch

from vllm_xdsl.backends.cuda.build import ToolchainMissing, Vendor, find_compiler
from vllm_xdsl.backends.cuda.variant import variant_args_problem
from vllm_xdsl.core.catalog import SPECS
from vllm_xdsl.ops.activations import activation_of
from vllm_xdsl.ops.impl import TensorMeta

ACT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# Devices a TensorMeta may name: eager says "cuda" for both vendors; lower-dispatch says the target.
DEVICES: dict[str, tuple[str, ...]] = {"cuda": ("cuda",), "rocm": ("cuda", "rocm"),
                                       "cpu": ("cpu",)}
_MAX_GROUPS = 48 * 1024 // 4  # per-group scales live in shared memory
_LOAD_BYTES = 16  # one vectorized load
_registered: set[str] = set()


def available(vendor: Vendor, target: str | None = None) -> bool | str:
    """True if this machine can run vendor's kernels, else why not.

    With a dispatch `target` (lower-dispatch compiling for it, or eager dispatch whose
    tensors are on that device) the question is whether the kernels serve that target
    and can be built here: the compiler matters, a GPU on this machine does not.
    """
    if vendor == "cpu":  # the host build (backends/cpu)
        if target not in (None, "cpu"):
            return f"the cpu kernels serve the cpu target, not {target}"
        from vllm_xdsl.backends.cpu.host import host_problem

        return host_problem() or True
    if target is not None:
        if target != vendor:
            return f"the {vendor} kernels serve the {vendor} target, not {target}"
        try:
            find_compiler(vendor)
        except ToolchainMissing as e:
            return str(e)
        return True
    is_hip = torch.version.hip is not None
    if (vendor == "rocm") != is_hip or (vendor == "cuda" and torch.version.cuda is None):
        return f"this torch build has no {vendor.upper()} support"
    if not torch.cuda.is_available():
        return f"no {vendor.upper()} GPU visible to torch"
    try:
        find_compiler(vendor)
    except ToolchainMissing as e:
        return str(e)
    return True


def supports_args(vendor: Vendor, op: str, **args: Any) -> bool | str:
    """Whether vendor's kernel of `op` runs these arguments (tensors as TensorMeta)."""
    metas = {k: v for k, v in args.items() if isinstance(v, TensorMeta)}
    devices = {m.device for m in metas.values()}
    if not devices <= set(DEVICES[vendor]) or len(devices) > 1:
        return f"tensors on {sorted(devices)}; the {vendor} kernels need one {vendor} device"
    problem = variant_args_problem(op, args, vendor)
    if problem is not None:
        return problem
    x = args["x"]
    if x.dtype not in ACT_DTYPES:
        return f"x dtype {x.dtype} is not f16, bf16 or f32"
    if x.ndim == 0:
        return "x needs a last (hidden) dimension"
    H = x.shape[-1]
    up = args.get("up")
    if up is not None and (up.dtype != x.dtype or up.ndim != x.ndim or up.shape[-1] != H):
        return f"up {up.dtype} {up.shape} does not match x {x.dtype} {x.shape}"
    if activation_of(op) is not None and up is None and H is not None:  # x = [gate | up]
        if H % 2:
            return f"last dimension {H} is not even"
        H //= 2
    w = args.get("weight")
    if w is not None:
        # x's dtype, or a float32 (Gemma-style) weight, unfused or fused with a quant.
        allowed = (x.dtype, torch.float32)
        if w.dtype not in allowed:
            return f"weight dtype {w.dtype} with x dtype {x.dtype} is not supported"
        if w.shape != (H,) and None not in w.shape and H is not None:
            return f"weight shape {w.shape} is not [{H}]"
    r = args.get("residual")
    if r is not None and r.dtype != x.dtype:
        return f"residual dtype {r.dtype} differs from x dtype {x.dtype}"
    group_size = args.get("group_size", 0)
    form = SPECS[op].form if op in SPECS else None  # an unfused quant's, else the argument's
    granularity = form.granularity if form is not None else args.get("granularity")
    if granularity == "group" and H is not None:
        if group_size <= 0 or H % group_size:
            return f"group_size {group_size} does not divide hidden size {H}"
        if H // group_size > _MAX_GROUPS and vendor != "cpu":
            return f"{H // group_size} groups per row exceed {_MAX_GROUPS}"
    return True


def launch_properties(op: str, dtype: torch.dtype, width: int, scheme: Any) -> dict[str, int]:
    """vec_width: elements per 16-byte load (8 for f16/bf16, 4 for f32), halved until it
    divides the row width (and the group size of a per-group quant); recorded by
    lower-dispatch on `cuda.<op>` / `rocm.<op>` (ops.registry.PropertyRule)."""
    vec = max(_LOAD_BYTES // dtype.itemsize, 1)
    group = scheme.group_size if scheme is not None and scheme.granularity == "group" else 0
    while vec > 1 and (width % vec or (group and group % vec)):
        vec //= 2
    return {"vec_width": vec}


def register(vendor: Vendor = "cuda") -> None:
    """Register every launcher as provider `vendor` (idempotent)."""
    if vendor in _registered:
        return
    from vllm_xdsl import ops
    from vllm_xdsl.backends.cuda.torch_ops import launchers

    fns = launchers(vendor)
    for name, op in ops.ALL_OPS.items():
        in_place = getattr(fns, f"{name}_inplace", None)
        fn = getattr(fns, name, None) if in_place is None else in_place
        if fn is None:
            continue  # an op this kernel family does not implement (yet)
        inplace = in_place is not None

        def check(_op: str = name, **args: Any) -> bool | str:
            return supports_args(vendor, _op, **args)

        op.register_impl(vendor, supported=lambda target=None: available(vendor, target),
                         supports_args=check,
                         inplace=inplace)(fn)
    if vendor != "cpu":  # vec_width is the GPU kernels' (a CPU row kernel masks its tail)
        ops.registry.register_property_rule(vendor, launch_properties)
    _registered.add(vendor)
