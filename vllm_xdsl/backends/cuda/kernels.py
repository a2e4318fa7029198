"""Python launchers of the compiled kernels: tensors in, kernel launch on the current stream.

`Kernels(vendor)` holds one launcher per op, each with exactly the native signature
(vllm_xdsl/ops/natives.py, fused.py). They check devices first (CPU tensors or a torch
without that GPU give a one-line DeviceUnavailable naming the op), build the library for
the device's arch on first use, and write outputs allocated here.

Not `from __future__ import annotations`: the torch custom op schemas are inferred from
the annotations of these functions.
"""

import functools
from typing import Any

import torch
from torch import Tensor

from vllm_xdsl.backends.cuda import library as L
from vllm_xdsl.backends.cuda.build import BuildError, ToolchainMissing, Vendor
from vllm_xdsl.backends.cuda.variant import KernelVariant, kernel_variant
from vllm_xdsl.core.dtypes import DType, fp8_max
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.core.variant import DEFAULT_VARIANT, QuantVariant
from vllm_xdsl.ops.activations import activation_of, gate_and_up
from vllm_xdsl.ops.dtypes import to_torch
from vllm_xdsl.ops.fused import scheme_of

_F32 = torch.float32
_GPU = {"cuda": "CUDA", "rocm": "ROCm"}


@functools.cache
def device_archs(vendor: Vendor, device: torch.device) -> tuple[str, ...]:
    """The arch to build for: sm_XY of an NVIDIA GPU, gfxNNN of an AMD one."""
    if vendor == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return (f"sm_{major}{minor}",)
    name = torch.cuda.get_device_properties(device).gcnArchName
    return (name.split(":")[0],)


def scheme_code(s: QuantScheme) -> int:
    if s.static:
        return L.S_STATIC_FP8 if s.is_fp8 else L.S_STATIC_I8
    if s.granularity == "token":
        return L.S_TOKEN_FP8 if s.is_fp8 else L.S_TOKEN_I8
    return L.S_GROUP_FP8


def _ptr(t: Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _rows(x: Tensor) -> Tensor:
    """x as [T, H] with a unit last stride (a view when possible, else a copy)."""
    if x.dim() == 0:
        raise ValueError("expected a tensor with a last (hidden) dimension")
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 or x2.shape[-1] <= 1 else x2.contiguous()


def _row_view(t: Tensor) -> Tensor | None:
    """t as a [T, H] view with a unit last stride, or None (so writes reach t itself)."""
    try:
        v = t.view(-1, t.shape[-1])
    except RuntimeError:
        return None
    return v if v.stride(-1) == 1 else None


def _f32(t: Tensor | None) -> Tensor | None:
    # Scale tensors may be bf16 after model.to(bf16); the contract converts them to fp32 first.
    return None if t is None else t.to(_F32).reshape(1).contiguous()


class Kernels:
    """The launchers of one vendor's library."""

    def __init__(self, vendor: Vendor, emulation: L.KernelLibrary | None = None) -> None:
        self.vendor = vendor
        # Tests: a CPU-emulated build of the same sources, called with CPU tensors.
        self.emulation = emulation

    def _prepare(self, op: str, *tensors: Tensor | None) -> tuple[L.KernelLibrary, int]:
        ns = f"vllm_xdsl_{self.vendor}::{op}"
        if self.emulation is not None:
            if any(t is not None and t.device.type != "cpu" for t in tensors):
                raise L.DeviceUnavailable(f"{ns}: the CPU emulation takes CPU tensors")
            return self.emulation, 0
        if self.vendor == "cpu":  # the host build (backends/cpu): CPU tensors, no stream
            if any(t is not None and t.device.type != "cpu" for t in tensors):
                raise L.DeviceUnavailable(f"{ns}: the cpu kernels take CPU tensors")
            try:
                return _host_library(), 0
            except (ToolchainMissing, BuildError) as e:
                raise type(e)(f"{ns}: {e}") from None
        for t in tensors:
            if t is not None and t.device.type != "cuda":
                raise L.DeviceUnavailable(
                    f"{ns}: needs {_GPU[self.vendor]} GPU tensors, got a tensor on {t.device}"
                )
        is_hip = torch.version.hip is not None
        if is_hip != (self.vendor == "rocm"):
            raise L.DeviceUnavailable(f"{ns}: this torch build drives {'ROCm' if is_hip else 'CUDA'} GPUs")
        device = next(t for t in tensors if t is not None).device
        try:
            lib = _library(self.vendor, device_archs(self.vendor, device))
        except (ToolchainMissing, BuildError) as e:  # first use builds: say which op needed it
            raise type(e)(f"{ns}: {e}") from None
        index = device.index if device.index is not None else torch.cuda.current_device()
        lib.call("vx_use_device", index, op=op)
        return lib, torch.cuda.current_stream(device).cuda_stream

    @staticmethod
    def _dtype(x: Tensor, op: str) -> int:
        code = L.DTYPE_CODES.get(str(x.dtype).removeprefix("torch."))
        if code is None:
            raise ValueError(f"{op}: activation dtype {x.dtype} is not f16, bf16 or f32")
        return code

    # --- norms and activation -----------------------------------------------------------

    def rms_norm(self, x: Tensor, weight: Tensor | None, epsilon: float,
                 variance_size: int | None = None) -> Tensor:
        lib, stream = self._prepare("rms_norm", x, weight)
        x2, H = _rows(x), x.shape[-1]
        vs = H if variance_size is None else variance_size
        if not 0 < vs <= H:
            raise ValueError(f"rms_norm: variance_size {vs} not in [1, {H}]")
        w = None if weight is None else weight.contiguous()
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        lib.call("vx_rms_norm", out.data_ptr(), x2.data_ptr(), _ptr(w), x2.shape[0], H,
                 x2.stride(0), vs, epsilon, self._dtype(x, "rms_norm"),
                 self._dtype(w if w is not None else x, "rms_norm"), stream, op="rms_norm")
        return out

    def fused_add_rms_norm(self, x: Tensor, residual: Tensor, weight: Tensor | None,
                           epsilon: float, rounded_sum: bool = False, *,
                           inplace: bool = False) -> tuple[Tensor, Tensor]:
        op = "fused_add_rms_norm"
        lib, stream = self._prepare(op, x, residual, weight)
        if residual.shape != x.shape or residual.dtype != x.dtype:
            raise ValueError(f"{op}: residual {tuple(residual.shape)} {residual.dtype} does not match x")
        x2, r2, H = _rows(x), _rows(residual), x.shape[-1]
        w = None if weight is None else weight.contiguous()
        xv, rv = (_row_view(x), _row_view(residual)) if inplace else (None, None)
        if xv is not None and rv is not None:
            # Each element is read and then written by the same thread: aliasing is safe.
            out2, ro2 = x2, r2 = xv, rv
        else:
            out2 = torch.empty((x2.shape[0], H), dtype=x.dtype, device=x.device)
            ro2 = torch.empty_like(out2)
        lib.call("vx_fused_add_rms_norm", out2.data_ptr(), ro2.data_ptr(), x2.data_ptr(),
                 r2.data_ptr(), _ptr(w), x2.shape[0], H, x2.stride(0), r2.stride(0),
                 out2.stride(0), ro2.stride(0), epsilon, int(rounded_sum), self._dtype(x, op),
                 self._dtype(w if w is not None else x, op), stream, op=op)
        if inplace:
            if out2 is not x2:  # not writable through a view: copy back
                x.copy_(out2.view(x.shape))
                residual.copy_(ro2.view(x.shape))
            return x, residual
        return out2.view(x.shape), ro2.view(x.shape)

    @staticmethod
    def _act_rows(op: str, x: Tensor, up: Tensor | None) -> tuple[Tensor, Tensor | None, int, int]:
        """x and up as [T, ...] rows, the code of op's activation and the output width d."""
        act = activation_of(op)
        if act is None:
            raise ValueError(f"{op} is not an act-and-mul op")
        gate, _ = gate_and_up(op.removesuffix("_quant"), x, up)  # the native's checks
        return _rows(x), None if up is None else _rows(up), L.ACTIVATION_CODES[act], gate.shape[-1]

    def act_and_mul(self, op: str, x: Tensor, up: Tensor | None = None) -> Tensor:
        """The act-and-mul op `op` (one with an activation code, L.ACTIVATION_CODES) on x, or on
        x and up."""
        lib, stream = self._prepare(op, x, up)
        x2, u2, act, d = self._act_rows(op, x, up)
        out = torch.empty((*x.shape[:-1], d), dtype=x.dtype, device=x.device)
        lib.call("vx_act_and_mul", out.data_ptr(), x2.data_ptr(), _ptr(u2), x2.shape[0], d,
                 x2.stride(0), 0 if u2 is None else u2.stride(0), act, self._dtype(x, op),
                 stream, op=op)
        return out

    # --- quantization -------------------------------------------------------------------

    def quant_args(self, s: QuantScheme, q_rows: int, hidden: int, x: Tensor,
                   scale: Tensor | None, scale_ub: Tensor | None, zero_point: Tensor | None = None,
                   op: str = "quant") -> tuple[list[Any], Tensor, KernelVariant | None]:
        """The VX_QUANT_ARGS of a scheme, the scales tensor the op returns (dynamic: in the
        variant's scale dtype), and the variant the arguments point to (keep it alive)."""
        sd = to_torch(s.variant.scale_dtype)
        if s.static:
            # A copy even when scale is already fp32 [1]: an op's outputs must never alias
            # its inputs (torch custom ops reject it; the caller may overwrite either).
            assert scale is not None
            scales = scale.to(_F32, copy=True).reshape(1)
            s_t = s_g = 0
        elif s.granularity == "token":
            scales = torch.empty((q_rows, 1), dtype=sd, device=x.device)
            s_t, s_g = 1, 0
        else:
            g = hidden // s.group_size
            if s.column_major_scales:
                scales = torch.empty((g, q_rows), dtype=sd, device=x.device).t()
            else:
                scales = torch.empty((q_rows, g), dtype=sd, device=x.device)
            s_t, s_g = scales.stride()
        ub = _f32(scale_ub)
        variant = kernel_variant(s, zero_point, q_rows, hidden, op)
        if self.vendor == "cpu" and variant is not None and zero_point is None:
            from vllm_xdsl.backends.cpu.op_library import remember_variant

            remember_variant(s, scheme_code(s), variant.struct, variant.struct.scale)
        args = [_ptr(scales if s.static else None), _ptr(ub), scheme_code(s),
                int(s.dtype == torch.float8_e4m3fnuz), s.qmax, s.group_size, s_t, s_g,
                int(s.use_ue8m0), s.group_eps, None if variant is None else variant.address()]
        # Static: the kernel reads the fp32 copy, which is also the returned scales.
        return args, scales, variant

    def quant(self, op: str, x: Tensor, s: QuantScheme, scale: Tensor | None,
              scale_ub: Tensor | None, zero_point: Tensor | None = None) -> tuple[Tensor, Tensor]:
        lib, stream = self._prepare(op, x, scale, scale_ub, zero_point)
        x2, H = _rows(x), x.shape[-1]
        if s.granularity == "group" and H % s.group_size:
            raise ValueError(f"{op}: group_size {s.group_size} does not divide hidden size {H}")
        q = torch.empty(x.shape, dtype=s.dtype, device=x.device)
        args, scales, _variant = self.quant_args(s, x2.shape[0], H, x, scale, scale_ub,
                                                 zero_point, op)
        lib.call("vx_quant", q.data_ptr(), scales.data_ptr(), x2.data_ptr(), x2.shape[0], H,
                 x2.stride(0), *args, self._dtype(x, op), stream, op=op)
        return q, scales

    def dynamic_scaled_fp8_quant(self, x: Tensor, fp8_dtype: torch.dtype,
                                 zero_point: Tensor | None = None,
                                 variant: QuantVariant = DEFAULT_VARIANT) -> tuple[Tensor, Tensor]:
        op = "dynamic_scaled_fp8_quant"
        lib, stream = self._prepare(op, x, zero_point)
        fmax = fp8_max(fp8_dtype)
        x2 = _rows(x)
        s = QuantScheme(fp8_dtype, False, "tensor", variant=variant)
        kv = kernel_variant(s, zero_point, x2.shape[0], x.shape[-1], op)
        q = torch.empty(x.shape, dtype=fp8_dtype, device=x.device)
        scale = torch.empty(1, dtype=_F32, device=x.device)  # the f32 scale the quant reads
        out = scale if s.variant.scale_dtype == DType.F32 else torch.empty(
            1, dtype=to_torch(s.variant.scale_dtype), device=x.device)
        lib.call("vx_dynamic_scaled_fp8_quant", q.data_ptr(), scale.data_ptr(), x2.data_ptr(),
                 x2.shape[0], x.shape[-1], x2.stride(0), int(fp8_dtype == torch.float8_e4m3fnuz),
                 fmax, None if kv is None else kv.address(), out.data_ptr(), self._dtype(x, op),
                 stream, op=op)
        return q, out

    # --- fused ----------------------------------------------------------------------------

    def fused(self, op: str, x: Tensor, residual: Tensor | None, weight: Tensor | None,
              epsilon: float, scale: Tensor | None, scale_ub: Tensor | None,
              scheme_args: tuple[Any, ...] | QuantScheme, rounded_sum: bool = False, *,
              inplace: bool = False, up: Tensor | None = None,
              zero_point: Tensor | None = None) -> tuple[Tensor, ...]:
        """`scheme_args`: a scheme (the ops: flat_fused built and checked it) or the fused
        op's flat scheme values (scheme_of checks them)."""
        s = (scheme_args if isinstance(scheme_args, QuantScheme)
             else scheme_of(op, scale, scale_ub, *scheme_args))
        lib, stream = self._prepare(op, x, residual, weight, scale, scale_ub, up, zero_point)
        x2 = _rows(x)
        is_act = activation_of(op) is not None
        u2, act, H = self._act_rows(op, x, up)[1:] if is_act else (None, 0, x.shape[-1])
        if s.granularity == "group" and H % s.group_size:
            raise ValueError(f"{op}: group_size {s.group_size} does not divide hidden size {H}")
        if weight is not None and weight.dtype not in (x.dtype, _F32):
            raise ValueError(f"{op}: weight dtype {weight.dtype} is neither x's {x.dtype} nor float32")
        q = torch.empty((*x.shape[:-1], H), dtype=s.dtype, device=x.device)
        qargs, scales, _variant = self.quant_args(s, x2.shape[0], H, x, scale, scale_ub,
                                                  zero_point, op)
        dt = self._dtype(x, op)
        w = None if weight is None else weight.contiguous()
        wdt = self._dtype(w if w is not None else x, op)
        if is_act:
            lib.call("vx_act_and_mul_quant", q.data_ptr(), scales.data_ptr(), x2.data_ptr(),
                     _ptr(u2), x2.shape[0], H, x2.stride(0), 0 if u2 is None else u2.stride(0),
                     act, *qargs, dt, stream, op=op)
            return q, scales
        if op == "rms_norm_quant":
            lib.call("vx_rms_norm_quant", q.data_ptr(), scales.data_ptr(), x2.data_ptr(), _ptr(w),
                     x2.shape[0], H, x2.stride(0), epsilon, *qargs, dt, wdt, stream, op=op)
            return q, scales
        assert residual is not None
        if residual.shape != x.shape or residual.dtype != x.dtype:
            raise ValueError(f"{op}: residual {tuple(residual.shape)} {residual.dtype} does not match x")
        r2 = _rows(residual)
        # residual_out is written contiguously ([T, H]); in place only if residual is that.
        write_through = inplace and residual.is_contiguous()
        ro = residual if write_through else torch.empty(x.shape, dtype=x.dtype, device=x.device)
        lib.call("vx_fused_add_rms_norm_quant", q.data_ptr(), ro.data_ptr(), scales.data_ptr(),
                 x2.data_ptr(), r2.data_ptr(), _ptr(w), x2.shape[0], H, x2.stride(0), r2.stride(0),
                 epsilon, int(rounded_sum), *qargs, dt, wdt, stream, op=op)
        if inplace and not write_through:
            residual.copy_(ro)
            ro = residual
        return q, ro, scales


@functools.cache
def _library(vendor: Vendor, archs: tuple[str, ...]) -> L.KernelLibrary:
    return L.load_library(vendor, archs)


@functools.cache
def _host_library() -> L.KernelLibrary:
    """The cpu kernel library, and its torch operator kernels loaded beside it: from the
    next call on, the cpu torch ops run in C++ (backends/cpu/op_library.py)."""
    from vllm_xdsl.backends.cpu.op_library import build_host, load_op_library

    kernels, _ = build_host()
    lib = L.KernelLibrary(kernels, "cpu")
    load_op_library(kernels)
    return lib
