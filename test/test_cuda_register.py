"""Providers "cuda" and "rocm": registration, availability, argument checks, torch ops, fakes,
and the clear error of a call that has no device."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from vllm_xdsl import ops
from vllm_xdsl.backends.cuda import library as L
from vllm_xdsl.backends.cuda.register import available
from vllm_xdsl.backends.cuda.torch_ops import define, launchers
from vllm_xdsl.ops.impl import TensorMeta

VENDORS = ("cuda", "rocm")
INPLACE = {"fused_add_rms_norm", "fused_add_rms_norm_quant"}
# Semantic ops the CUDA/HIP kernel family does not implement: dispatch never offers it.
CUDA_LACKS = {"gelu_and_mul_sparse", "fatrelu_and_mul"}
CUDA_OPS = {name: op for name, op in ops.ALL_OPS.items() if name not in CUDA_LACKS}
FP8 = torch.float8_e4m3fn


@pytest.mark.parametrize("vendor", VENDORS)
def test_every_op_registered(vendor: str) -> None:
    for name, op in ops.ALL_OPS.items():
        if name in CUDA_LACKS:
            assert vendor not in op.impls(), name
            continue
        impl = op.impls()[vendor]
        assert impl.inplace == (name in INPLACE), name
        assert inspect.signature(impl.fn) == op.signature, name


@pytest.mark.parametrize("vendor", VENDORS)
def test_unavailable_here_with_reason(vendor: str) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    reason = available(vendor)  # type: ignore[arg-type]
    assert isinstance(reason, str) and vendor.upper() in reason
    assert ops.rms_norm.impls()[vendor].unavailable() == reason


def _meta(shape: tuple, dtype: torch.dtype = torch.bfloat16, device: str = "cuda") -> TensorMeta:
    return TensorMeta(dtype, shape, device)


def _rejects(op: str, vendor: str, *args: object, **kwargs: object) -> str | None:
    from vllm_xdsl.ops.dispatch import meta_args

    return ops.ALL_OPS[op].impls()[vendor].rejects(meta_args(op, args, kwargs))


@pytest.mark.parametrize("vendor", VENDORS)
def test_supports_args(vendor: str) -> None:
    x, w = _meta((None, 4096)), _meta((4096,))
    assert _rejects("rms_norm", vendor, x, w, 1e-6) is None
    assert _rejects("rms_norm", vendor, x, _meta((4096,), torch.float32), 1e-6) is None  # Gemma
    # A Gemma f32 weight fuses with any quant; other weight dtypes are not CUDA's.
    assert _rejects("rms_norm_quant", vendor, x, _meta((4096,), torch.float32),
                    1e-6, None, None, FP8, False, "token") is None
    assert "weight dtype" in _rejects("rms_norm_quant", vendor, x, _meta((4096,), torch.float16),
                                      1e-6, None, None, FP8, False, "token")
    assert f"need one {vendor} device" in _rejects("rms_norm", vendor, _meta((3, 64), device="cpu"), None, 1e-6)
    assert "does not divide" in _rejects("per_token_group_fp8_quant", vendor, x, 100)
    assert _rejects("per_token_group_fp8_quant", vendor, x, 128) is None
    assert "not even" in _rejects("silu_and_mul", vendor, _meta((5, 33)))
    assert _rejects("gelu_and_mul", vendor, _meta((5, 33)), _meta((5, 33))) is None  # gate, up
    assert "does not match x" in _rejects("gelu_tanh_and_mul", vendor, _meta((5, 33)),
                                          _meta((5, 33), torch.float16))
    assert "residual dtype" in _rejects("fused_add_rms_norm", vendor, x,
                                        _meta((None, 4096), torch.float16), w, 1e-6)
    assert "f16, bf16 or f32" in _rejects("static_scaled_int8_quant", vendor,
                                          _meta((2, 16), torch.int32), _meta((1,), torch.float32))
    rocm_ok = _rejects("rms_norm", vendor, _meta((None, 64), device="rocm"), None, 1e-6) is None
    assert rocm_ok == (vendor == "rocm")


def _example_calls() -> dict[str, tuple]:
    x = torch.randn(5, 64, dtype=torch.bfloat16)
    r = torch.randn(5, 64, dtype=torch.bfloat16)
    w = torch.randn(64, dtype=torch.bfloat16)
    s = torch.tensor([0.1])
    return {
        "rms_norm": (x, w, 1e-6),
        "fused_add_rms_norm": (x, r, w, 1e-6),
        "static_scaled_fp8_quant": (x, s, torch.float8_e4m3fnuz),
        "dynamic_scaled_fp8_quant": (x,),
        "dynamic_per_token_scaled_fp8_quant": (x, s),
        "per_token_group_fp8_quant": (x, 16, True, True),
        "static_scaled_int8_quant": (x, s),
        "dynamic_per_token_scaled_int8_quant": (x,),
        "silu_and_mul": (x,),
        "rms_norm_quant": (x, w, 1e-6, None, None, FP8, False, "group", 16, True),
        "fused_add_rms_norm_quant": (x, r, w, 1e-6, s, None, torch.int8, True, "tensor"),
        "silu_and_mul_quant": (x, None, s, FP8, False, "token"),
        "gelu_and_mul": (x, r),
        "gelu_tanh_and_mul": (x,),
        "gelu_and_mul_quant": (x, None, None, FP8, False, "group", 16, True, True, 1e-10, None, "",
                               r),
        "gelu_tanh_and_mul_quant": (x, s, None, torch.int8, True, "tensor"),
    }


@pytest.mark.parametrize("vendor", VENDORS)
def test_torch_ops_fakes_match_native(vendor: str) -> None:
    define(vendor)  # type: ignore[arg-type]
    namespace = getattr(torch.ops, f"vllm_xdsl_{vendor}")
    calls = _example_calls()
    assert set(calls) == set(CUDA_OPS)
    with FakeTensorMode() as mode:
        for name, args in calls.items():
            fargs = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
            got = getattr(namespace, name)(*fargs)
            want = ops.ALL_OPS[name].native(*fargs)
            got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
            for g, w in zip(got, want, strict=True):
                assert (g.shape, g.dtype, g.stride()) == (w.shape, w.dtype, w.stride()), name
        x, r = (mode.from_tensor(t) for t in calls["fused_add_rms_norm"][:2])
        assert namespace.fused_add_rms_norm_(x, r, None, 1e-6) is None
        q, scales = namespace.fused_add_rms_norm_quant_(x, r, None, 1e-6, None, None, FP8, False, "token")
        assert q.dtype == FP8 and scales.shape == (5, 1)


@pytest.mark.parametrize("vendor", VENDORS)
def test_call_without_device_is_clear_error(vendor: str) -> None:
    fns = launchers(vendor)  # type: ignore[arg-type]
    for name, args in _example_calls().items():
        fn = getattr(fns, name if name not in INPLACE else f"{name}_inplace")
        with pytest.raises(L.DeviceUnavailable) as info:
            fn(*args)
        msg = str(info.value)
        assert msg.startswith(f"vllm_xdsl_{vendor}::{name}: ") and "\n" not in msg, msg
        assert "got a tensor on cpu" in msg


def test_invalid_scheme_is_value_error_before_device() -> None:
    x = torch.randn(2, 16)
    with pytest.raises(ValueError, match="rms_norm_quant: .*per-group quantization is fp8 only"):
        launchers("cuda").rms_norm_quant(x, None, 1e-6, None, None, torch.int8, False, "group", 8)


@pytest.mark.parametrize("vendor", VENDORS)
def test_variants_reach_the_kernels(vendor: str) -> None:
    # The torch ops pass a variant and zero point on to the kernels (which need a device
    # here), where they used to refuse them; a bad variant is a ValueError naming the op.
    fns = launchers(vendor)  # type: ignore[arg-type]
    x = torch.randn(5, 64, dtype=torch.bfloat16)
    zp = torch.ones(5, 1, dtype=torch.bfloat16)
    ct = "quotient bf16 scale bf16 zero_eps 0.0078125"
    calls = [
        lambda: fns.static_scaled_fp8_quant(x, torch.tensor([0.1]), FP8, zp[:1], "div quotient bf16"),
        lambda: fns.dynamic_scaled_fp8_quant(x, FP8, None, "scale bf16"),
        lambda: fns.dynamic_per_token_scaled_int8_quant(x, zp, ct + " range 127.5"),
        lambda: fns.per_token_group_fp8_quant(x, 16, False, False, 1e-10, FP8, None, "min_scale"),
        lambda: fns.rms_norm_quant(x, None, 1e-6, None, None, FP8, False, "token",
                                   zero_point=zp, variant=ct),
        lambda: fns.silu_and_mul_quant(x, None, None, torch.int8, False, "token",
                                       zero_point=zp, variant="recip"),
    ]
    for call in calls:
        with pytest.raises(L.DeviceUnavailable, match="got a tensor on cpu"):
            call()
    with pytest.raises(ValueError, match=r"^dynamic_per_token_scaled_fp8_quant: .*'bogus'"):
        fns.dynamic_per_token_scaled_fp8_quant(x, None, FP8, None, "bogus")
    with pytest.raises(ValueError, match=r"^rms_norm_quant: .*'bogus'"):
        fns.rms_norm_quant(x, None, 1e-6, None, None, FP8, False, "token", variant="bogus")
