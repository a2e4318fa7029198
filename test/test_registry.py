"""Implementation registry: signature checks, reserved/duplicate names, availability, metadata."""

from __future__ import annotations

import pytest
import torch
from xdsl.dialects.builtin import DYNAMIC_INDEX, BFloat16Type, TensorType
from xdsl.utils.test_value import create_ssa_value

from vllm_xdsl import ops
from vllm_xdsl.ops import RegistrationError, TensorMeta
from vllm_xdsl.transforms.lowering.meta_args import meta_of


def rms(x, weight, epsilon, variance_size=None):
    return ops.rms_norm.native(x, weight, epsilon, variance_size)


def test_register_and_list(scratch):
    fn = scratch(ops.rms_norm, "t_reg", rms)
    assert fn is rms
    impls = ops.rms_norm.impls()
    assert impls["t_reg"].fn is rms and impls["t_reg"].provider == "t_reg"
    assert list(impls)[-1] == "native"
    assert any(i.provider == "t_reg" for i in ops.registry.implementations("rms_norm"))
    assert "t_reg" in ops.registry.registered_providers()


@pytest.mark.parametrize("bad,diff", [
    (lambda x, weight, epsilon: x, "parameter 3 is nothing, expected variance_size=None"),
    (lambda x, w, epsilon, variance_size=None: x, "parameter 1 is w"),
    (lambda x, weight, epsilon, variance_size=0: x, "variance_size=0"),
    (lambda x, weight, epsilon, variance_size=None, extra=1: x, "parameter 4 is extra=1"),
    (lambda x, weight, epsilon, *, variance_size=None: x, "keyword-only"),
    (lambda *args: None, "variadic positional"),
])
def test_signature_mismatch(bad, diff):
    with pytest.raises(RegistrationError) as e:
        ops.rms_norm.register_impl("t_bad")(bad)
    msg = str(e.value)
    assert "rms_norm" in msg and "'t_bad'" in msg and diff in msg
    assert "\n" not in msg
    assert "t_bad" not in ops.rms_norm.impls()


def test_reserved_duplicate_and_invalid_names(scratch):
    with pytest.raises(RegistrationError, match="'native' is reserved"):
        ops.rms_norm.register_impl("native")(rms)
    with pytest.raises(RegistrationError, match="invalid provider name 'auto'"):
        ops.rms_norm.register_impl("auto")(rms)
    with pytest.raises(RegistrationError, match="invalid provider name 'a b'"):
        ops.rms_norm.register_impl("a b")(rms)
    scratch(ops.rms_norm, "t_dup", rms)
    with pytest.raises(RegistrationError, match="rms_norm: provider 't_dup' already registered"):
        ops.rms_norm.register_impl("t_dup")(rms)


def test_inplace_needs_inplace_outputs():
    with pytest.raises(RegistrationError, match="silu_and_mul.*no in-place outputs"):
        ops.silu_and_mul.register_impl("t_inp", inplace=True)(lambda x, up=None: x)


def test_supported_is_lazy_and_cached(scratch):
    calls = []

    def probe():
        calls.append(1)
        return "no device here"

    scratch(ops.rms_norm, "t_lazy", rms, supported=probe)
    assert calls == []  # not evaluated at registration
    impl = ops.rms_norm.impls()["t_lazy"]
    assert impl.unavailable() == "no device here"
    assert impl.unavailable() == "no device here"
    assert calls == [1]


@pytest.mark.parametrize("supported,reason", [
    (True, None), (False, "not supported here"), ("needs sm90", "needs sm90"),
    (lambda: True, None), (lambda: False, "not supported here"),
    (lambda: 1 / 0, "availability check raised ZeroDivisionError: division by zero"),
])
def test_supported_values(scratch, supported, reason):
    scratch(ops.rms_norm, "t_sup", rms, supported=supported)
    assert ops.rms_norm.impls()["t_sup"].unavailable() == reason


def test_supports_args_sees_metadata(scratch):
    seen = []

    def check(x, weight, epsilon, variance_size):
        seen.append((x, weight, epsilon, variance_size))
        return True if x.shape[-1] % 8 == 0 else "hidden size not a multiple of 8"

    scratch(ops.rms_norm, "t_args", rms, supports_args=check)
    impl = ops.rms_norm.impls()["t_args"]
    x, w = torch.ones(3, 64, dtype=torch.bfloat16), torch.ones(64, dtype=torch.bfloat16)
    assert impl.rejects(ops.meta_args("rms_norm", (x, w, 1e-6))) is None
    assert seen[0] == (TensorMeta(torch.bfloat16, (3, 64), "cpu"),
                       TensorMeta(torch.bfloat16, (64,), "cpu"), 1e-6, None)
    assert impl.rejects(ops.meta_args("rms_norm", (torch.ones(3, 12), None, 1e-6))) == \
        "hidden size not a multiple of 8"


def test_supports_args_false_and_raising(scratch):
    scratch(ops.rms_norm, "t_f", rms, supports_args=lambda **kw: False)
    scratch(ops.rms_norm, "t_r", rms, supports_args=lambda **kw: kw["nope"])
    meta = ops.meta_args("rms_norm", (torch.ones(2, 4), None, 1e-6))
    assert ops.rms_norm.impls()["t_f"].rejects(meta) == "rejected the arguments"
    assert ops.rms_norm.impls()["t_r"].rejects(meta) == "supports_args raised KeyError: 'nope'"


def test_tensor_meta():
    t = torch.ones(5, 16, dtype=torch.float16)
    m = TensorMeta.from_tensor(t)
    assert m == TensorMeta(torch.float16, (5, 16), "cpu") and m.ndim == 2
    assert len({m, TensorMeta.from_tensor(torch.zeros(5, 16, dtype=torch.float16))}) == 1
    # lower-dispatch's view of an IR value: the same metadata, unknown dims as None.
    ir = TensorType(BFloat16Type(), [DYNAMIC_INDEX, 4096])
    value = create_ssa_value(ir)
    assert meta_of(value, "cuda") == TensorMeta(torch.bfloat16, (None, 4096), "cuda")
    with pytest.raises(AttributeError):
        m.dtype = torch.float32  # frozen


def test_meta_args_binds_defaults_and_rejects_bad_calls():
    x = torch.ones(2, 8)
    meta = ops.meta_args("per_token_group_fp8_quant", (x, 4), {"use_ue8m0": True})
    assert meta == {"x": TensorMeta(torch.float32, (2, 8), "cpu"), "group_size": 4,
                    "column_major_scales": False, "use_ue8m0": True, "eps": 1e-10,
                    "fp8_dtype": torch.float8_e4m3fn, "zero_point": None, "variant": ""}
    with pytest.raises(ops.DispatchError, match="rms_norm: bad arguments"):
        ops.meta_args("rms_norm", (x,))
