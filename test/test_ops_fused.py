"""Fused natives are bitwise the composition of the unfused natives; invalid schemes fail."""

from __future__ import annotations

import pytest
import torch

from vllm_xdsl import ops
from vllm_xdsl.core.scheme import QuantScheme

E4M3, E4M3UZ, I8 = torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.int8
N = {name: ops.ALL_OPS[name].native for name in ops.UNFUSED}

# (quant_dtype, static, granularity, extra scheme kwargs, scale_ub)
SCHEMES = [
    (E4M3, True, "tensor", {}, None),
    (E4M3UZ, True, "tensor", {}, None),
    (I8, True, "tensor", {}, None),
    (E4M3, False, "token", {}, None),
    (E4M3, False, "token", {}, torch.tensor([2.0])),
    (E4M3UZ, False, "token", {}, None),
    (E4M3, False, "group", {"group_size": 64}, None),
    (E4M3, False, "group", {"group_size": 32, "column_major_scales": True, "use_ue8m0": True}, None),
    (E4M3UZ, False, "group", {"group_size": 64, "group_eps": 1e-6}, None),
    (I8, False, "token", {}, None),
]


def unfused_quant(y, qd, static, gran, kw, scale, scale_ub):
    """The unfused quant op a scheme names, spelled out (not via quant_native)."""
    if static:
        q = N["static_scaled_fp8_quant"](y, scale, qd) if qd != I8 else N[
            "static_scaled_int8_quant"](y, scale)
        return q, scale.float().reshape(1)
    if qd == I8:
        return N["dynamic_per_token_scaled_int8_quant"](y)
    if gran == "token":
        return N["dynamic_per_token_scaled_fp8_quant"](y, scale_ub, qd)
    return N["per_token_group_fp8_quant"](
        y, kw["group_size"], kw.get("column_major_scales", False), kw.get("use_ue8m0", False),
        kw.get("group_eps", 1e-10), qd)


def assert_same(a: torch.Tensor, b: torch.Tensor):
    assert a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
    assert torch.equal(a.view(torch.uint8) if a.element_size() == 1 and a.is_floating_point()
                       else a, b.view(torch.uint8) if b.element_size() == 1
                       and b.is_floating_point() else b)


def inputs(dtype, tokens=7, hidden=128):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, hidden, generator=g).to(dtype)
    r = torch.randn(tokens, hidden, generator=g).to(dtype)
    w = torch.randn(hidden, generator=g).to(dtype)
    return x, r, w


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: f"{s[0]}-{s[1]}-{s[2]}-{s[3]}-{s[4] is not None}")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_fused_equals_composition(scheme, dtype):
    qd, static, gran, kw, ub = scheme
    x, r, w = inputs(dtype)
    scale = torch.tensor([0.013]) if static else None
    args = (scale, ub, qd, static, gran)

    q, s = ops.rms_norm_quant.native(x, w, 1e-6, *args, **kw)
    eq, es = unfused_quant(N["rms_norm"](x, w, 1e-6), qd, static, gran, kw, scale, ub)
    assert_same(q, eq)
    assert_same(s, es)

    q, res, s = ops.fused_add_rms_norm_quant.native(x, r, None, 3e-7, *args, **kw)
    y, eres = N["fused_add_rms_norm"](x, r, None, 3e-7)
    eq, es = unfused_quant(y, qd, static, gran, kw, scale, ub)
    assert_same(q, eq)
    assert_same(res, eres)
    assert_same(s, es)

    q, s = ops.silu_and_mul_quant.native(x, *args, **kw) if gran != "group" else \
        ops.silu_and_mul_quant.native(torch.cat([x, r], -1), *args, **kw)
    xin = x if gran != "group" else torch.cat([x, r], -1)
    eq, es = unfused_quant(N["silu_and_mul"](xin), qd, static, gran, kw, scale, ub)
    assert_same(q, eq)
    assert_same(s, es)


def test_static_scales_are_a_float32_copy():
    x, _, w = inputs(torch.bfloat16)
    scale = torch.tensor([0.5], dtype=torch.bfloat16)
    _, s = ops.rms_norm_quant.native(x, w, 1e-6, scale, None, E4M3, True, "tensor")
    assert s.dtype == torch.float32 and s.shape == (1,) and s.item() == 0.5
    assert s.data_ptr() != scale.data_ptr()


@pytest.mark.parametrize("args,match", [
    ((None, None, E4M3, False, "tensor"), "dynamic per-tensor quantization cannot be fused"),
    ((None, None, I8, False, "group", 64), "per-group quantization is fp8 only"),
    ((torch.ones(1), None, E4M3, True, "token"), "a static scale is per tensor"),
    ((None, torch.ones(1), I8, False, "token"), "scale_ub applies to dynamic per-token fp8"),
    ((None, None, E4M3, True, "tensor"), "static scheme needs a scale"),
    ((torch.ones(1), None, E4M3, False, "token"), "dynamic scheme takes scale=None"),
    ((None, None, torch.float16, False, "token"), "quant dtype must be fp8"),
    ((None, None, E4M3, False, "row"), "granularity must be one of"),
    ((None, None, E4M3, False, "group", 0), "positive group_size"),
    ((None, None, E4M3, False, "token", 64), "apply to per-group only"),
])
def test_invalid_schemes(args, match):
    x, r, w = inputs(torch.float32)
    with pytest.raises(ValueError, match=match) as e:
        ops.rms_norm_quant.native(x, w, 1e-6, *args)
    assert "rms_norm_quant" in str(e.value)
    with pytest.raises(ValueError, match=match):
        ops.fused_add_rms_norm_quant(x, r, w, 1e-6, *args)  # dispatched call, same check
    with pytest.raises(ValueError, match=match):
        ops.silu_and_mul_quant.native(x, *args)


def test_quant_native_matches_scheme():
    x, _, _ = inputs(torch.float16)
    q, s = ops.quant_native(x, QuantScheme(E4M3, False, "tensor"))
    eq, es = N["dynamic_scaled_fp8_quant"](x, E4M3)
    assert_same(q, eq)
    assert_same(s, es)
    q, s = ops.quant_native(x, QuantScheme(I8, True, "tensor"), scale=torch.tensor([0.1]))
    assert s is None and torch.equal(q, N["static_scaled_int8_quant"](x, torch.tensor([0.1])))
    with pytest.raises(ValueError, match="needs a scale"):
        ops.quant_native(x, QuantScheme(I8, True, "tensor"))
    with pytest.raises(ValueError, match="takes no scale"):
        ops.quant_native(x, QuantScheme(E4M3, False, "token"), scale=torch.ones(1))
