"""The kernels as torch ops, `torch.ops.vllm_xdsl_<vendor>.<op>` (vendor cuda, rocm or cpu).

Each op has the native signature; its fake is the native contract (shape-, dtype- and
stride-exact, runs on fake tensors), so export and torch.compile trace through it without
a GPU. Its kernel is the Python launcher (CompositeExplicitAutograd); the cpu ops also get
C++ kernels on their CPU key once the kernels are built (backends/cpu/op_library.py). `fused_add_rms_norm_` and `fused_add_rms_norm_quant_` are the in-place variants: they
mutate `x`/`residual` (resp. `residual`) and return nothing, as mutating custom ops must.

`launchers(vendor)` returns plain functions with exactly the native signatures that call
these ops; the in-place ones return the overwritten inputs as the op's outputs.
"""

import functools
import inspect
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor

from vllm_xdsl.backends.cuda.build import Vendor
from vllm_xdsl.backends.cuda.kernels import Kernels
from vllm_xdsl.backends.cuda.library import ACTIVATION_CODES
from vllm_xdsl.core.catalog import FORM_FIELDS, SPECS, OpSpec, quant_specs
from vllm_xdsl.core.dtypes import is_fp8
from vllm_xdsl.core.scheme import Granularity, QuantScheme
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.ops import ALL_OPS
from vllm_xdsl.ops import fused as F
from vllm_xdsl.ops import natives as N
from vllm_xdsl.ops.activations import ACT_AND_MUL, ACTIVATIONS, FUSED_ACT_OPS
from vllm_xdsl.ops.fused_signature import flat_fused
from vllm_xdsl.ops.op import native_binder, resolve_native
from vllm_xdsl.ops.torch_library import define_op


@functools.lru_cache(maxsize=256)
def _unfused_scheme(
    dtype: torch.dtype, static: bool, granularity: Granularity, variant: str = "", op: str = "",
    **kw: Any
) -> QuantScheme:
    """The scheme of an unfused quant op; a bad variant is a ValueError naming the op.
    Cached: building and checking a scheme costs more than a host kernel on one token."""
    try:
        return QuantScheme(dtype, static, granularity, variant=parse_variant(variant), **kw)
    except ValueError as e:
        raise ValueError(f"{op}: {e}") from None


def _unfused_quant(k: Kernels, spec: OpSpec) -> Callable[..., Any]:
    """The op of an unfused quant, with its native's signature: its form and its scheme
    parameters make the scheme; q, and the scales of a dynamic form."""
    signature, bind = native_binder(spec)
    assert spec.form is not None
    static, granularity, names = spec.form.static, spec.form.granularity, spec.param_names
    at = {n: i for i, n in enumerate(names)}

    def launch(*args: Any, **kwargs: Any) -> Any:
        values = bind(args, kwargs)
        x, zero_point = values[0], values[at["zero_point"]]
        dtype = values[at["fp8_dtype"]] if "fp8_dtype" in at else torch.int8
        if "fp8_dtype" in at and not is_fp8(dtype):  # else an int8 scheme would run
            raise ValueError(f"{spec.name}: fp8_dtype {dtype} is not an fp8 dtype")
        s = _unfused_scheme(dtype, static, granularity, values[at["variant"]], spec.name,
                            **{FORM_FIELDS[n]: values[at[n]] for n in names if n in FORM_FIELDS})
        if not static and granularity == "tensor":  # its own kernel: a global absmax first
            return k.dynamic_scaled_fp8_quant(x, dtype, zero_point, s.variant)
        q, scales = k.quant(spec.name, x, s, values[at["scale"]] if static else None,
                            values[at["scale_ub"]] if "scale_ub" in at else None, zero_point)
        return q if static else (q, scales)

    launch.__name__ = launch.__qualname__ = spec.name
    launch.__dict__["__signature__"] = signature
    return launch


@functools.cache
def define(vendor: Vendor, kernels: Kernels | None = None, namespace: str | None = None
           ) -> SimpleNamespace:
    """Register vendor's custom ops (once) and return them by op name. With `kernels` (tests:
    a CPU-emulated build), the same functions calling those kernels, registered nowhere, or
    as the ops of `namespace` if given (tests of the cpu operator kernels)."""
    k = Kernels(vendor) if kernels is None else kernels
    ns = namespace or f"vllm_xdsl_{vendor}"
    register = kernels is None or namespace is not None
    ops: dict[str, object] = {}

    def op(fake, mutates_args=()):  # noqa: ANN001, ANN202 - decorator factory
        def wrap(fn):  # noqa: ANN001, ANN202
            ops[fn.__name__] = fn if not register else define_op(
                ns, fn.__name__, fn, fake, mutates_args=mutates_args)
            return ops[fn.__name__]
        return wrap

    @op(N.rms_norm)
    def rms_norm(x: Tensor, weight: Tensor | None, epsilon: float,
                 variance_size: int | None = None) -> Tensor:
        return k.rms_norm(x, weight, epsilon, variance_size)

    @op(N.fused_add_rms_norm)
    def fused_add_rms_norm(x: Tensor, residual: Tensor, weight: Tensor | None,
                           epsilon: float, rounded_sum: bool = False) -> tuple[Tensor, Tensor]:
        return k.fused_add_rms_norm(x, residual, weight, epsilon, rounded_sum)

    # The unfused quants: one launcher per catalog form.
    for spec in quant_specs():
        op(resolve_native(spec))(_unfused_quant(k, spec))

    # The act-and-mul family: one kernel, the activation a code. An activation without one
    # (or with scalar parameters of its own) is an op this family does not implement.
    for name, activation in ACTIVATIONS.items():
        if activation in ACTIVATION_CODES and not SPECS[name].own_scalars:
            op(ACT_AND_MUL[name])(_act_and_mul(k, name))

    @op(F.rms_norm_quant)
    @flat_fused("rms_norm_quant")
    def rms_norm_quant(x: Tensor, weight: Tensor | None, epsilon: float, scheme: QuantScheme,
                       scale: Tensor | None, scale_ub: Tensor | None, zero_point: Tensor | None
                       ) -> tuple[Tensor, Tensor]:
        q, scales = k.fused("rms_norm_quant", x, None, weight, epsilon, scale, scale_ub, scheme,
                            zero_point=zero_point)
        return q, scales

    @op(F.fused_add_rms_norm_quant)
    @flat_fused("fused_add_rms_norm_quant")
    def fused_add_rms_norm_quant(x: Tensor, residual: Tensor, weight: Tensor | None,
                                 epsilon: float, rounded_sum: bool, scheme: QuantScheme,
                                 scale: Tensor | None, scale_ub: Tensor | None,
                                 zero_point: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        q, residual_out, scales = k.fused("fused_add_rms_norm_quant", x, residual, weight,
                                          epsilon, scale, scale_ub, scheme, rounded_sum,
                                          zero_point=zero_point)
        return q, residual_out, scales

    for name in FUSED_ACT_OPS:
        op(getattr(F, name))(_act_and_mul_quant(k, name))

    # In-place variants: mutate the donated inputs, return nothing.
    def no_outputs(*args: object) -> None:
        return None

    @op(no_outputs, mutates_args=("x", "residual"))
    def fused_add_rms_norm_(x: Tensor, residual: Tensor, weight: Tensor | None,
                            epsilon: float, rounded_sum: bool = False) -> None:
        k.fused_add_rms_norm(x, residual, weight, epsilon, rounded_sum, inplace=True)

    def fused_add_rms_norm_quant_fake(*args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
        q, _, scales = F.fused_add_rms_norm_quant(*args, **kwargs)
        return q, scales

    @op(fused_add_rms_norm_quant_fake, mutates_args=("residual",))
    @flat_fused("fused_add_rms_norm_quant", name="fused_add_rms_norm_quant_")
    def fused_add_rms_norm_quant_(x: Tensor, residual: Tensor, weight: Tensor | None,
                                  epsilon: float, rounded_sum: bool, scheme: QuantScheme,
                                  scale: Tensor | None, scale_ub: Tensor | None,
                                  zero_point: Tensor | None) -> tuple[Tensor, Tensor]:
        q, _, scales = k.fused("fused_add_rms_norm_quant", x, residual, weight, epsilon, scale,
                               scale_ub, scheme, rounded_sum, inplace=True,
                               zero_point=zero_point)
        return q, scales

    return SimpleNamespace(**ops)


def _act_and_mul(k: Kernels, name: str) -> Callable[..., Tensor]:
    def act_and_mul(x: Tensor, up: Tensor | None = None) -> Tensor:
        return k.act_and_mul(name, x, up)

    act_and_mul.__name__ = act_and_mul.__qualname__ = name
    return act_and_mul


def _act_and_mul_quant(k: Kernels, name: str) -> Callable[..., tuple[Tensor, Tensor]]:
    @flat_fused(name)
    def act_and_mul_quant(x: Tensor, up: Tensor | None, scheme: QuantScheme,
                          scale: Tensor | None, scale_ub: Tensor | None,
                          zero_point: Tensor | None) -> tuple[Tensor, Tensor]:
        q, scales = k.fused(name, x, None, None, 0.0, scale, scale_ub, scheme, up=up,
                            zero_point=zero_point)
        return q, scales

    return act_and_mul_quant


def _with_native_signature(custom: Callable[..., Any], name: str) -> Callable[..., Any]:
    native = ALL_OPS[name].native

    def call(*args: Any, **kwargs: Any) -> Any:
        return custom(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    # What inspect.signature(call) reports (a function attribute: no __wrapped__, so that
    # the tuning cache still hashes this backend's source, not the native's).
    call.__dict__["__signature__"] = inspect.signature(native)
    return call


@functools.cache
def launchers(vendor: Vendor) -> SimpleNamespace:
    """Functions with the native signatures calling the ops (what the registry holds).

    The cpu ops too: their CPU kernels are C++ (backends/cpu/op_library.py), a call costs
    what a torch op's dispatch costs (eager calls and compiled graphs alike)."""
    t = define(vendor)
    fns = {name: _with_native_signature(getattr(t, name), name) for name in vars(t)
           if not name.endswith("_")}

    def fused_add_rms_norm_inplace(x: Tensor, residual: Tensor, weight: Tensor | None,
                                   epsilon: float, rounded_sum: bool = False
                                   ) -> tuple[Tensor, Tensor]:
        """Writes out into x and residual_out into residual; returns them."""
        t.fused_add_rms_norm_(x, residual, weight, epsilon, rounded_sum)
        return x, residual

    def fused_add_rms_norm_quant_inplace(*args: Any, **kwargs: Any
                                         ) -> tuple[Tensor, Tensor, Tensor]:
        """Writes residual_out into residual; returns (q, residual, scales). The flat
        arguments go to the op as they come: building the scheme here would cost more than
        the kernel on one token (the op's kernel checks them)."""
        q, scales = t.fused_add_rms_norm_quant_(*args, **kwargs)
        return q, args[1] if len(args) > 1 else kwargs["residual"], scales

    fns["fused_add_rms_norm_inplace"] = fused_add_rms_norm_inplace
    fns["fused_add_rms_norm_quant_inplace"] = _with_native_signature(
        fused_add_rms_norm_quant_inplace, "fused_add_rms_norm_quant")
    return SimpleNamespace(**fns)
