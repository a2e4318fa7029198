"""Eager dispatch: same policy as select, cached decisions, in-place safety."""

from __future__ import annotations

import pytest
import torch

from vllm_xdsl import ops
from vllm_xdsl.ops import DispatchError


@pytest.fixture(autouse=True)
def clean(monkeypatch, scratch):
    """conftest's `scratch`, with no priority from the environment."""
    monkeypatch.delenv("VLLM_XDSL_PRIORITY", raising=False)
    return scratch


def xw(tokens=3, hidden=64, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(tokens)
    return (torch.randn(tokens, hidden, generator=g).to(dtype),
            torch.randn(hidden, generator=g).to(dtype))


def counting_rms(calls):
    def rms_norm(x, weight, epsilon, variance_size=None):
        calls.append(x.shape)
        return ops.rms_norm.native(x, weight, epsilon, variance_size)
    return rms_norm


def test_cpu_default_is_native_and_equal(clean):
    calls = []
    clean(ops.rms_norm, "t_e", counting_rms(calls))
    x, w = xw()
    out = ops.rms_norm(x, w, 1e-6)
    assert calls == []  # cpu default priority: native only
    assert torch.equal(out, ops.rms_norm.native(x, w, 1e-6))
    assert ops.rms_norm.explain(x, w, 1e-6).provider == "native"


def test_priority_sources_select_impl(clean, monkeypatch):
    calls = []
    clean(ops.rms_norm, "t_e", counting_rms(calls))
    x, w = xw()
    with ops.priority("rms_norm=t_e"):
        assert torch.equal(ops.rms_norm(x, w, 1e-6), ops.rms_norm.native(x, w, 1e-6))
    assert len(calls) == 1
    ops.rms_norm(x, w, 1e-6)
    assert len(calls) == 1  # the context ended: native again
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "t_e")
    ops.rms_norm(x, w, 1e-6)
    assert len(calls) == 2  # env var seen without any reload call
    ops.set_priority("rms_norm=native")  # explicit beats env
    ops.rms_norm(x, w, 1e-6)
    assert len(calls) == 2
    ops.set_priority(None)
    monkeypatch.delenv("VLLM_XDSL_PRIORITY")
    ops.rms_norm(x, w, 1e-6)
    assert len(calls) == 2


def test_decision_cached_per_metadata(clean):
    checks = []

    def supports(x, weight, epsilon, variance_size):
        checks.append((x.shape, weight is None))
        return True

    calls = []
    clean(ops.rms_norm, "t_c", counting_rms(calls), supports_args=supports)
    ops.set_priority("t_c")
    x, w = xw()
    for _ in range(3):
        ops.rms_norm(x, w, 1e-6)
    ops.rms_norm(x=x, weight=w, epsilon=1e-6)  # keywords: same key
    assert checks == [((3, 64), False)] and len(calls) == 4
    ops.rms_norm(*xw(tokens=5), 1e-6)  # new shape: decided again
    ops.rms_norm(x, None, 1e-6)  # weight absent: decided again
    ops.rms_norm(x, w, torch.tensor(1e-6, dtype=torch.float64))  # runtime scalar epsilon
    ops.rms_norm(x, w, torch.tensor(1e-6, dtype=torch.float64))  # ...keyed by metadata
    assert checks[1:] == [((5, 64), False), ((3, 64), True), ((3, 64), False)]
    # A new registration drops cached decisions.
    clean(ops.silu_and_mul, "t_other", lambda x, up=None: x)
    ops.rms_norm(x, w, 1e-6)
    assert len(checks) == 5


def test_eager_rejection_falls_back(clean):
    calls = []
    clean(ops.rms_norm, "t_r", counting_rms(calls),
          supports_args=lambda x, **_: x.dtype == torch.float16 or "f16 only")
    ops.set_priority("t_r")
    ops.rms_norm(*xw(dtype=torch.bfloat16), 1e-6)
    assert calls == []
    ops.rms_norm(*xw(dtype=torch.float16), 1e-6)
    assert len(calls) == 1
    d = ops.rms_norm.explain(*xw(dtype=torch.bfloat16), 1e-6)
    assert d.rejected == [("t_r", "f16 only")]


def test_eager_errors(clean):
    clean(ops.rms_norm, "t_off", counting_rms([]), supported="no device")
    x, w = xw()
    with ops.priority("rms_norm=t_off!"), pytest.raises(DispatchError, match="t_off.*no device"):
        ops.rms_norm(x, w, 1e-6)
    with ops.priority("rms_norm=nosuch"), pytest.raises(DispatchError, match="'nosuch'"):
        ops.rms_norm(x, w, 1e-6)
    with pytest.raises(DispatchError, match="bad priority"):
        ops.set_priority("rms_norm=")
    with pytest.raises(TypeError):
        ops.rms_norm(x)


def inplace_fused_add(calls):
    def fused_add_rms_norm(x, residual, weight, epsilon, rounded_sum=False):
        out, res = ops.fused_add_rms_norm.native(x, residual, weight, epsilon, rounded_sum)
        x.copy_(out)  # an in-place kernel: results written over the inputs
        residual.copy_(res)
        calls.append(1)
        return x, residual
    return fused_add_rms_norm


def test_inplace_impl_never_modifies_caller_inputs(clean):
    calls = []
    clean(ops.fused_add_rms_norm, "t_ip", inplace_fused_add(calls), inplace=True)
    ops.set_priority("t_ip")
    x, w = xw()
    r = torch.randn_like(x)
    x0, r0 = x.clone(), r.clone()
    want = ops.fused_add_rms_norm.native(x, r, w, 1e-6)
    for got in (ops.fused_add_rms_norm(x, r, w, 1e-6),
                ops.fused_add_rms_norm(x, residual=r, weight=w, epsilon=1e-6),
                ops.fused_add_rms_norm(x=x, residual=r, weight=w, epsilon=1e-6)):
        assert torch.equal(x, x0) and torch.equal(r, r0)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert len(calls) == 3
    # Donated: the impl may overwrite them; the returned values are right.
    out, res = ops.fused_add_rms_norm.maybe_inplace(x, r, w, 1e-6)
    assert len(calls) == 4 and out is x and res is r
    assert torch.equal(out, want[0]) and torch.equal(res, want[1])


def test_maybe_inplace_with_out_of_place_impl():
    x, w = xw()
    r = torch.randn_like(x)
    x0 = x.clone()
    out, res = ops.fused_add_rms_norm.maybe_inplace(x, r, w, 1e-6)
    assert torch.equal(x, x0)
    assert torch.equal(out, ops.fused_add_rms_norm.native(x, r, w, 1e-6)[0])


def test_all_ops_dispatch_eagerly_to_native():
    x, w = xw(hidden=128)
    sc = torch.tensor([0.05])
    assert torch.equal(ops.silu_and_mul(x), ops.silu_and_mul.native(x))
    q, s = ops.per_token_group_fp8_quant(x, 64, column_major_scales=True)
    eq, es = ops.per_token_group_fp8_quant.native(x, 64, True)
    assert torch.equal(q.float(), eq.float()) and s.stride() == es.stride()
    q, s = ops.rms_norm_quant(x, w, 1e-6, sc, None, torch.int8, True, "tensor")
    assert torch.equal(q, ops.rms_norm_quant.native(x, w, 1e-6, sc, None, torch.int8, True,
                                                    "tensor")[0])


def test_cache_key_is_cheap(clean):
    # The key must hash in ~100 ns: no Priority values (hashing those costs microseconds),
    # only a plain token object, devices, dtypes, shapes and scalars. An argument check
    # makes the decision depend on the arguments, so the full key is used.
    clean(ops.rms_norm, "t_k", counting_rms([]), supports_args=lambda **_: True)
    ops.set_priority("rms_norm=t_k")
    x, w = xw()
    ops.rms_norm(x, w, 1e-6)
    (key,) = [k for k in ops.rms_norm._cache]
    assert type(key[0]) is object
    cheap = (object, torch.device, torch.dtype, torch.Size, float, type(None))
    assert all(type(v) in cheap for v in key), [type(v) for v in key]
    assert not ops.rms_norm._device_cache.by_device


def counting_select(monkeypatch):
    """Count the decisions eager dispatch makes (calls of `select`)."""
    from vllm_xdsl.ops import eager

    made = []

    def select(*args, **kwargs):
        made.append(args[0].name)
        return real(*args, **kwargs)

    real = eager.select
    monkeypatch.setattr(eager, "select", select)
    return made


def test_cached_call_does_not_select(clean, monkeypatch):
    made = counting_select(monkeypatch)
    clean(ops.rms_norm, "t_s", counting_rms([]), supports_args=lambda **_: True)
    x, w = xw()
    for priority in ("rms_norm=t_s", None):  # full key (argument check), device key (none)
        ops.set_priority(priority)
        made.clear()
        for _ in range(3):
            ops.rms_norm(x, w, 1e-6)
        ops.fused_add_rms_norm.maybe_inplace(x.clone(), x.clone(), w, 1e-6)
        ops.fused_add_rms_norm.maybe_inplace(x.clone(), x.clone(), w, 1e-6)
        assert made == ["rms_norm", "fused_add_rms_norm"], priority


def test_decision_without_argument_check_cached_per_device(clean, monkeypatch):
    # Native on the CPU reads no argument: one decision serves every dtype and shape on
    # the device, cached by (policy, device) without the full key.
    made = counting_select(monkeypatch)
    op = ops.rms_norm
    for tokens, dtype in ((3, torch.bfloat16), (5, torch.bfloat16), (3, torch.float32)):
        x, w = xw(tokens, dtype=dtype)
        assert torch.equal(op(x, w, 1e-6), op.native(x, w, 1e-6))
    op(x, None, 1e-6)
    assert made == ["rms_norm"]
    by_device = op._device_cache
    assert not op._cache and by_device.token is ops.policy.STATE.token
    assert list(by_device.by_device) == [x.device]
    # Another device is decided on its own.
    m = torch.empty(3, 64, device="meta")
    assert op(m, None, 1e-6).device.type == "meta"
    assert made == ["rms_norm", "rms_norm"]


def test_cached_per_device_decision_follows_policy_and_registrations(clean, monkeypatch):
    calls = []
    x, w = xw()
    clean(ops.silu_and_mul, "t_late", lambda x, up=None: x)  # a provider, not of rms_norm yet
    ops.set_priority("rms_norm=t_late,native")  # native
    ops.rms_norm(x, w, 1e-6)
    assert ops.rms_norm._device_cache.by_device and calls == []
    clean(ops.rms_norm, "t_late", counting_rms(calls))  # registering drops the decision
    ops.rms_norm(x, w, 1e-6)
    assert calls == [(3, 64)]
    ops.set_priority(None)  # native again
    ops.rms_norm(x, w, 1e-6)
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "t_late")
    ops.rms_norm(*xw(tokens=4), 1e-6)
    assert calls == [(3, 64), (4, 64)]
    # An argument check added later makes the decision depend on the arguments again.
    clean(ops.rms_norm, "t_f16", counting_rms(calls),
          supports_args=lambda x, **_: x.dtype == torch.float16 or "f16 only")
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "t_f16,native")
    ops.rms_norm(x, w, 1e-6)
    ops.rms_norm(*xw(dtype=torch.float16), 1e-6)
    assert calls == [(3, 64), (4, 64), (3, 64)]
