"""raise-native on vLLM's own spellings: `_C` kernel calls into `torch.empty` buffers
(functionalized by AOTAutograd), vLLM's fused `_C` kernels, vLLM IR nodes and AITER norms,
with stand-ins for the ops this machine lacks (vllm_standins.py, vLLM 0.33's schemas).
A block of vLLM's `_C` forms with static, per-token and per-group fp8 comes out of
raise-native + fuse-norm-quant with every norm->quant and act->quant pair fused, and
lower-dispatch picks a provider for each; the raised graph computes what the kernels do."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import vllm_standins
from helpers.raised import raised_run
from xdsl.dialects.builtin import ModuleOp

from vllm_xdsl.dialects import make_context
from vllm_xdsl.frontend import capture, import_graph
from vllm_xdsl.ops.tolerance import assert_close_contract
from vllm_xdsl.pipeline import PipelineOptions, run_pipeline, semantic_counts
from vllm_xdsl.transforms.raising.raise_native import RaiseNativePass

vllm_standins.register()
C, IR, AITER = torch.ops._C, torch.ops.vllm_ir, torch.ops.vllm_aiter
BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn
H, GS, EPS = 128, 64, 1e-6


def _q(x: torch.Tensor, cols: int | None = None) -> torch.Tensor:
    return torch.empty(*x.shape[:-1], cols or x.shape[-1], dtype=FP8)


def _s(x: torch.Tensor, cols: int) -> torch.Tensor:
    return torch.empty(*x.shape[:-1], cols, dtype=torch.float32)


def c_block(x, r, w1, w2, w3, scale, up):  # noqa: ANN001, ANN201
    """vLLM's graph with custom ops on and its fusion passes off, plus its fused kernels."""
    outs = []
    n = torch.empty_like(x)
    C.rms_norm(n, x, w1, EPS)  # norm -> static
    q = _q(x)
    C.static_scaled_fp8_quant(q, n, scale, None)
    outs.append(q)
    a, b = x.clone(), r.clone()
    C.fused_add_rms_norm(a, b, w2, EPS)  # fused add -> per-token
    q, s = _q(a), _s(a, 1)
    C.dynamic_per_token_scaled_fp8_quant(q, a, s, None)
    outs += [q, s, b]
    n = torch.empty_like(x)
    C.rms_norm(n, b, w3, EPS)  # norm -> per-group
    q, s = _q(n), _s(n, H // GS)
    C.per_token_group_fp8_quant(n, q, s, GS, 1e-10, -448.0, 448.0, False, False, False)
    outs += [q, s]
    for act, quant in ((C.silu_and_mul, "static"), (C.gelu_and_mul, "group"),
                       (C.gelu_tanh_and_mul, "token")):
        o = torch.empty(*up.shape[:-1], H, dtype=BF16)
        act(o, up)
        q = _q(o)
        if quant == "static":
            C.static_scaled_fp8_quant(q, o, scale, None)
            outs.append(q)
        elif quant == "group":
            s = _s(o, H // GS)
            C.per_token_group_fp8_quant(o, q, s, GS, 1e-10, -448.0, 448.0, False, False, False)
            outs += [q, s]
        else:
            s = _s(o, 1)
            C.dynamic_per_token_scaled_fp8_quant(q, o, s, None)
            outs += [q, s]
    # vLLM's fused kernels (what its fusion passes write)
    q = _q(x)
    C.rms_norm_static_fp8_quant(q, x, w1, scale, EPS)
    b = r.clone()
    q2 = _q(x)
    C.fused_add_rms_norm_static_fp8_quant(q2, x, b, w2, scale, EPS)
    b3 = r.clone()
    q3, s3 = _q(x), _s(x, 1)
    C.rms_norm_dynamic_per_token_quant(q3, x, w3, s3, EPS, None, b3)
    q4, s4 = _q(x), _s(x, H // GS)
    C.rms_norm_per_block_quant(q4, x, w1, s4, EPS, None, None, GS, False)
    q5 = _q(x)  # their product stays in f32 before the quant
    C.silu_and_mul_quant(q5, up, scale)
    q6, s6 = _q(x), _s(x, H // GS)
    C.silu_and_mul_per_block_quant(q6, up, s6, GS, None, False)
    return (*outs, q, q2, b, q3, s3, b3, q4, s4, q5, q6, s6)


PAIRS = 3 + 3 + 6  # norm->quant, act->quant, fused kernels
CALLS = 2 * 3 + 2 * 3 + 6


def _inputs(t: int = 17) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(BF16)
    return (r(t, H), r(t, H), r(H), r(H), r(H), torch.tensor([0.02]), r(t, 2 * H))


def _raised(fn, args, dynamic_dim: bool = True) -> tuple[ModuleOp, torch.fx.GraphModule]:  # noqa: ANN001
    gm = capture(fn, *args, dynamic=None if dynamic_dim else False,
                 mark_dynamic={0: 0, 1: 0, 6: 0} if dynamic_dim else {})
    module = import_graph(gm).module
    return module, gm


@pytest.mark.parametrize("functionalized", ["v2", "v1"])
def test_c_forms_fused_and_dispatched(functionalized: str) -> None:
    """v2: AOTAutograd's form of a `_C` call into a torch.empty buffer (Dynamo's graph);
    v1: `auto_functionalized`, the form of vLLM's post-grad graph (vLLM turns v2 off)."""
    args = _inputs()
    with torch._inductor.config.patch(enable_auto_functionalized_v2=functionalized == "v2"):
        module, gm = _raised(c_block, args)
    target = "auto_functionalized_v2" if functionalized == "v2" else "auto_functionalized"
    assert str(module).count(f'"higher_order::{target}"') == CALLS
    result = run_pipeline(module, PipelineOptions(
        passes=("raise-native", "fuse-norm-quant", "lower-dispatch"), target="cpu"))
    after_fuse = next(s for s in result.stages if s.name == "fuse-norm-quant").op_counts
    fused = {k: v for k, v in after_fuse.items() if k.startswith("vllm.") and "quant" in k}
    assert fused == {
        "vllm.rms_norm_quant": 4, "vllm.fused_add_rms_norm_quant": 3,
        "vllm.silu_and_mul_quant": 3, "vllm.gelu_and_mul_quant": 1,
        "vllm.gelu_tanh_and_mul_quant": 1,
    }, after_fuse
    assert sum(fused.values()) == PAIRS
    assert not any(k.startswith(("vllm.", "torch.call")) and "_C::" in k for k in after_fuse)
    assert semantic_counts(module) == Counter()  # each one lowered onto a provider
    assert result.report is not None and result.report.count("->") >= PAIRS, result.report


def test_c_forms_compute_what_the_kernels_compute() -> None:
    args = _inputs()
    module, expected, got = raised_run(c_block, args)
    counts = Counter(op.name for op in module.walk() if op.name.startswith("vllm."))
    assert sum(counts.values()) == 2 * PAIRS, counts  # every call raised
    # Bit for bit: each raised op rounds where the kernel does (torch's f32 arithmetic on
    # both sides here; a GPU kernel's rsqrtf may differ by f32 ulps, OPS.md's freedom).
    # The fused silu-and-mul kernels compute CUDA's x / (1 + expf(-x)), our contract torch's
    # silu: on ~4 % of f32 values they differ by an ulp, so those three outputs (q, q and
    # scales, last) are within OPS.md's tolerances instead.
    f32_silu = len(expected) - 3
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert e.dtype == g.dtype and e.shape == g.shape, i
        if i >= f32_silu:
            assert_close_contract(g, e, kind="scales" if e.dtype == torch.float32 else "value")
            continue
        assert torch.equal(e.view(torch.uint8) if e.dtype == FP8 else e,
                           g.view(torch.uint8) if g.dtype == FP8 else g), i


def ir_block(x, r, w, vs_w):  # noqa: ANN001, ANN201
    a = IR.rms_norm(x, w, EPS)
    b = IR.rms_norm(x, None, EPS)
    c = IR.rms_norm(x, vs_w, EPS, 64)
    d, e = IR.fused_add_rms_norm(x, r, w.float() + 1.0, EPS)  # Gemma's f32 weight
    f, g = IR.fused_add_rms_norm.maybe_inplace(x.clone(), r.clone(), w, EPS)
    h = AITER.rms_norm(x, w, EPS)
    i, j = AITER.fused_add_rms_norm(x, r, w, EPS)
    k = IR.gelu_and_mul_sparse(x, 1.6448536269514722, "tanh")  # Gemma-3n's
    n = IR.gelu_and_mul_sparse(x, 0.5)
    return a, b, c, d, e, f, g, h, i, j, k, n


@pytest.mark.parametrize("functionalized", ["v2", "v1"])
def test_vllm_ir_nodes_raised_bit_exact(functionalized: str) -> None:
    """v1: `maybe_inplace` under `auto_functionalized`, as the post-grad pass meets it when
    vLLM IR's torch wrap is on (mode 2 with Inductor)."""
    x, r, w = (torch.randn(5, H).to(BF16) for _ in range(3))
    w = w[0]
    args = (x, r, w, w.clone())
    with torch._inductor.config.patch(enable_auto_functionalized_v2=functionalized == "v2"):
        imported, _ = _raised(ir_block, args, dynamic_dim=False)
        module, expected, got = raised_run(ir_block, args)
    target = "auto_functionalized_v2" if functionalized == "v2" else "auto_functionalized"
    assert str(imported).count(f'"higher_order::{target}"') == 1, imported
    counts = Counter(op.name for op in module.walk() if op.name.startswith(("vllm.", "torch.call")))
    assert counts == {"vllm.rms_norm": 4, "vllm.fused_add_rms_norm": 3,
                      "vllm.gelu_and_mul_sparse": 2, "torch.call": counts["torch.call"]}, counts
    assert not any("vllm_ir" in str(op) or "vllm_aiter" in str(op) for op in module.walk()
                   if op.name == "torch.call")
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.equal(e, g), i


def engine_alias_block(x, r, w):  # noqa: ANN001, ANN201
    """The forms vLLM's engine (mode 2, vLLM IR's torch wrap on) hands the backend: a
    layer's output read through a view of its buffer with the buffer's layout goes into
    `maybe_inplace`, which AOTAutograd spells `_x_alias` under auto_functionalized_v2; the
    same for a `_C` kernel writing through such a view (`_result_alias`)."""
    a = x.clone().view(-1, H)  # the view the engine's o_proj output is
    y, res = IR.fused_add_rms_norm.maybe_inplace(a, r.clone(), w, EPS)
    y2, res2 = IR.fused_add_rms_norm.maybe_inplace(y.view(-1, H), res, w, EPS)
    n = torch.empty_like(x)
    C.rms_norm(n.view(-1, H), res2, w, EPS)
    return y, res, y2, res2, n


def test_alias_views_raised_bit_exact() -> None:
    x, r = torch.randn(5, H).to(BF16), torch.randn(5, H).to(BF16)
    args = (x, r, torch.randn(H).to(BF16))
    module, _ = _raised(engine_alias_block, args, dynamic_dim=False)
    text = str(module)
    assert text.count("_x_alias = true") == 2 and "_result_alias = true" in text, text
    module, expected, got = raised_run(engine_alias_block, args)
    counts = Counter(op.name for op in module.walk() if op.name.startswith("vllm."))
    assert counts == {"vllm.fused_add_rms_norm": 2, "vllm.rms_norm": 1}, counts
    assert not any("vllm_ir" in str(op) or "_C." in str(op) for op in module.walk()
                   if op.name == "torch.call")
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert torch.equal(e, g), i


def test_exact_leaves_the_default_level_forms() -> None:
    x, r, w = torch.randn(5, H).to(BF16), torch.randn(5, H).to(BF16), torch.randn(H).to(BF16)
    module, _ = _raised(lambda x, r, w: AITER.fused_add_rms_norm(x, r, w, EPS), (x, r, w), False)
    RaiseNativePass(exact=True).apply(make_context(), module)
    assert not any(op.name.startswith("vllm.") for op in module.walk())


@pytest.mark.parametrize("form", ["azp", "ue8m0", "variance_size_fused", "slice_view"])
def test_forms_left_unraised(form: str) -> None:
    x, r = torch.randn(5, H).to(BF16), torch.randn(5, H).to(BF16)

    def fn(x, r):  # noqa: ANN001, ANN202
        if form == "azp":
            q = torch.empty_like(x, dtype=torch.int8)
            C.static_scaled_int8_quant(q, x, torch.tensor([0.1]), torch.tensor([3], dtype=torch.int32))
            return q
        if form == "ue8m0":
            q, s = _q(x), _s(x, H // GS)
            C.per_token_group_fp8_quant(x, q, s, GS, 1e-10, -448.0, 448.0, True, False, False)
            return q, s
        if form == "slice_view":  # x a slice of its base (`_x_slice_dim`), not the base
            base = torch.cat([x, r], -1)
            y, res = IR.fused_add_rms_norm.maybe_inplace(base[:, :H], r.clone(), None, EPS)
            return y, res, base
        return IR.fused_add_rms_norm(x, r, None, EPS, 64)
    module, _ = _raised(fn, (x, r), False)
    if form == "slice_view":
        assert "_x_slice_dim" in str(module)
    RaiseNativePass().apply(make_context(), module)
    assert not any(op.name.startswith("vllm.") for op in module.walk())


FP8_MAX = torch.finfo(FP8).max
FP8_MIN_SCALING_FACTOR = 1.0 / (FP8_MAX * 512.0)


def quantfp8_per_token(x, scale_ub=None):  # noqa: ANN001, ANN201
    """vLLM 0.32's QuantFP8.forward_native, dynamic per token, as written there."""
    x_max = x.abs().amax(dim=-1)
    x_max = x_max.unsqueeze(-1).to(torch.float32)
    if scale_ub is not None:
        x_max = x_max.clamp(max=scale_ub)
    scale = (x_max / FP8_MAX).clamp(min=FP8_MIN_SCALING_FACTOR)
    out = x.to(torch.float32) * scale.to(torch.float32).reciprocal()
    return out.clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def rms_norm_native(x, w):  # noqa: ANN001, ANN201
    """vLLM IR's rms_norm native (its default CPU form)."""
    xf = x.to(torch.float32)
    xf = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (xf.to(w.dtype) * w).to(x.dtype)


def quantfp8_block(x, w, ub):  # noqa: ANN001, ANN201
    return (*quantfp8_per_token(rms_norm_native(x, w)), *quantfp8_per_token(x),
            *quantfp8_per_token(rms_norm_native(x, w), ub))


def test_quantfp8_per_token_native_raised_fused_and_exact() -> None:
    """QuantFP8's per-token native reduces without the kept dimension and unsqueezes
    (`amax(|x|, -1).unsqueeze(-1)`): raised to the `recip` variant, fused after a norm,
    and the raised graph computes what the native does, bit for bit."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(17, H, generator=g).to(BF16)
    w = torch.randn(H, generator=g).to(BF16)
    x[3] = 0  # a zero row: the floored scale
    args = (x, w, torch.tensor([0.004]))
    module, expected, got = raised_run(quantfp8_block, args)
    counts = Counter(op.name for op in module.walk() if op.name.startswith("vllm."))
    assert counts == {"vllm.rms_norm": 2, "vllm.dynamic_per_token_scaled_fp8_quant": 3}, counts
    quants = [str(op) for op in module.walk() if op.name.endswith("per_token_scaled_fp8_quant")]
    assert all("#vllm.quant_variant<recip>" in q for q in quants), quants
    for i, (e, r) in enumerate(zip(expected, got, strict=True)):
        assert e.dtype == r.dtype and e.shape == r.shape, i
        assert torch.equal(e.view(torch.uint8) if e.dtype == FP8 else e,
                           r.view(torch.uint8) if r.dtype == FP8 else r), i
    module, _ = _raised(quantfp8_block, args, False)
    result = run_pipeline(module, PipelineOptions(passes=("raise-native", "fuse-norm-quant"),
                                                  target="cpu"))
    after = result.stages[-1].op_counts
    assert after.get("vllm.rms_norm_quant") == 2, after
    assert after.get("vllm.dynamic_per_token_scaled_fp8_quant") == 1, after
    assert "vllm.rms_norm" not in after, after
