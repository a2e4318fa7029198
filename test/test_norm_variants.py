"""The norm variants of docs/OPS.md ("Variants"): the rounded_sum fused add and fused
norm+quant with a weight of another dtype than x (Gemma's f32 `1 + w`).

- the natives against independent float64 / explicit references;
- the Triton kernels (interpreted) against the natives of their own variant, and
  distinguishably not the other variant's;
- raise-native on real HF models (tiny random configs, nothing downloaded): every residual
  add becomes `fused_add_rms_norm{rounded_sum}` and the compiled model equals eager bit for
  bit; a Gemma norm followed by a static fp8 quant fuses.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from vllm_xdsl import compile as backend
from vllm_xdsl.ops import fused as F
from vllm_xdsl.ops import natives as N

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32
E4M3 = torch.float8_e4m3fn


def _x(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 3).to(dtype)


def _ulp(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One step of `dtype` at the magnitude of v (float64)."""
    mant = {F16: 10, BF16: 7, F32: 23}[dtype]
    tiny = torch.finfo(dtype).tiny
    return torch.exp2(torch.floor(torch.log2(v.abs().clamp_min(tiny)))) * 2.0**-mant


def _norm64(s: torch.Tensor, w: torch.Tensor | None, eps: float) -> torch.Tensor:
    y = s / torch.sqrt(s.pow(2).mean(-1, keepdim=True) + eps)
    return y if w is None else y * w.double()


# --- natives --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [F16, BF16, F32], ids=str)
@pytest.mark.parametrize("weight", ["none", "same", "f32"])
def test_rounded_sum_native_against_float64(dtype: torch.dtype, weight: str) -> None:
    x, r = _x((33, 256), dtype, 1), _x((33, 256), dtype, 2)
    w = {"none": None, "same": _x((256,), dtype, 3), "f32": _x((256,), F32, 3)}[weight]
    out, residual_out = N.fused_add_rms_norm(x, r, w, 1e-6, rounded_sum=True)
    # The exact sum of two f16/bf16/f32 normal values of this range fits in a float64.
    s = (x.double() + r.double()).to(dtype)
    assert torch.equal(residual_out, s)
    ref = _norm64(s.double(), w, 1e-6)  # the norm of the ROUNDED sum
    # Within the contract's roundings of the output dtype (two for a weight of x's dtype),
    # plus, in f32, a few f32 steps of arithmetic.
    steps = 8.0 if dtype == F32 else 2.0
    assert ((out.double() - ref).abs() <= _ulp(ref, dtype) * steps).all()
    # And exactly rms_norm of residual_out: the norm reads the rounded sum.
    assert torch.equal(out, N.rms_norm(residual_out, w, 1e-6))
    default = N.fused_add_rms_norm(x, r, w, 1e-6)
    assert torch.equal(default[1], residual_out)
    # The two variants coincide in f32 and differ in f16/bf16.
    assert torch.equal(default[0], out) == (dtype == F32)


def test_rounded_sum_is_what_the_dtype_add_computes() -> None:
    # `x + r` in bf16/f16 is the f32 sum rounded once (the variant's definition), including
    # sums that cancel and sums that differ by many binades.
    for dtype in (F16, BF16):
        x = torch.cat([_x((4096,), dtype, 4), torch.tensor([1.0, 3e4, -2.0, 1e-3], dtype=dtype)])
        r = torch.cat([_x((4096,), dtype, 5), torch.tensor([2**-9, 1.0, 2.0, 1e-7], dtype=dtype)])
        assert torch.equal(x + r, N.fused_add_rms_norm(x, r, None, 1e-6, True)[1])


def _composition_f32_weight(x: torch.Tensor, w: torch.Tensor, eps: float, scale: torch.Tensor
                            ) -> torch.Tensor:
    """rms_norm with an f32 weight, then static fp8, written out independently."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = (y * w).to(x.dtype)  # y.to(f32) is y; the f32 product, then the cast back
    return torch.clamp(y.float() * (1.0 / scale), -448.0, 448.0).to(E4M3)


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_fused_quant_with_f32_weight_is_the_composition(dtype: torch.dtype) -> None:
    x, r = _x((17, 128), dtype, 6), _x((17, 128), dtype, 7)
    w, scale = torch.rand(128) + 0.5, torch.tensor([0.02])
    scheme = (scale, None, E4M3, True, "tensor")
    q, _ = F.rms_norm_quant(x, w, 1e-6, *scheme)
    assert torch.equal(q.view(torch.uint8), _composition_f32_weight(x, w, 1e-6, scale).view(torch.uint8))
    q, res, _ = F.fused_add_rms_norm_quant(x, r, w, 1e-6, *scheme, rounded_sum=True)
    s = (x.float() + r.float()).to(dtype)
    assert torch.equal(res, s)
    assert torch.equal(q.view(torch.uint8), _composition_f32_weight(s, w, 1e-6, scale).view(torch.uint8))


# --- Triton -------------------------------------------------------------------------------

QUANTS = [  # (scale, scale_ub, quant_dtype, static, granularity, group_size)
    (torch.tensor([0.02]), None, E4M3, True, "tensor", 0),
    (None, None, E4M3, False, "token", 0),
    (None, None, E4M3, False, "group", 64),
    (None, None, torch.int8, False, "token", 0),
]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.dtype.itemsize == 1 else t


def _equal(got: tuple, want: tuple) -> bool:
    return all(torch.equal(_bits(g), _bits(w)) for g, w in zip(got, want, strict=True))


def _agreement(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() == b.float()).float().mean().item()


def _within_contract(got: tuple, want: tuple, norm_first: bool) -> None:
    from vllm_xdsl.ops.tolerance import Kind, contract_error

    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        kind: Kind = "norm" if norm_first and i == 0 else ("scales" if g.dtype == F32 else "value")
        problem = contract_error(g, w, kind=kind)
        assert problem is None, (i, problem)


@pytest.fixture
def triton_functions(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from vllm_xdsl.backends.triton import functions

    return functions


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
@pytest.mark.parametrize("weight", ["none", "same", "f32"])
def test_triton_variants(triton_functions, dtype: torch.dtype, weight: str) -> None:
    """Each variant's kernel: residual_out bit for bit; the norm output within the contract
    and equal to its own variant's native but for the row sum's reduction order (>= 99 %),
    visibly not to the other's (<= 95 %), so a kernel reading the wrong sum fails; the
    fused quants within the contract (fp8: >= 99 % exactly equal)."""
    T = triton_functions
    x, r = _x((17, 128), dtype, 8), _x((17, 128), dtype, 9)
    w = {"none": None, "same": _x((128,), dtype, 10), "f32": torch.rand(128) + 0.5}[weight]
    for rounded in (False, True):
        want = N.fused_add_rms_norm(x, r, w, 1e-6, rounded)
        other = N.fused_add_rms_norm(x, r, w, 1e-6, not rounded)
        got = T.fused_add_rms_norm(x, r, w, 1e-6, rounded)
        assert torch.equal(got[1], want[1])
        _within_contract(got, want, norm_first=True)
        assert _agreement(got[0], want[0]) >= 0.99 > 0.95 >= _agreement(got[0], other[0])
        for q in QUANTS:
            want = F.fused_add_rms_norm_quant(x, r, w, 1e-6, *q, rounded_sum=rounded)
            got = T.fused_add_rms_norm_quant(x, r, w, 1e-6, *q, rounded_sum=rounded)
            assert torch.equal(got[1], want[1])
            _within_contract(got, want, norm_first=False)
    for q in QUANTS:
        _within_contract(T.rms_norm_quant(x, w, 1e-6, *q), F.rms_norm_quant(x, w, 1e-6, *q),
                         norm_first=False)


def test_triton_spec_and_source() -> None:
    from vllm_xdsl.backends.triton.emit import emit_source
    from vllm_xdsl.backends.triton.spec import KernelSpec

    spec = KernelSpec("fused_add_rms_norm", BF16, F32, rounded_sum=True, block_size=64)
    assert "rsum" in spec.name and spec != KernelSpec("fused_add_rms_norm", BF16, F32, block_size=64)
    source = emit_source(spec)
    assert "x = _round_bf16(x + tl.load(residual_ptr" in source, source
    assert "rounded_sum = True" in source
    with pytest.raises(ValueError, match="rounded_sum belongs to the fused add ops only"):
        KernelSpec("rms_norm", BF16, rounded_sum=True)


def test_triton_op_from_ir_carries_rounded_sum() -> None:
    from xdsl.parser import Parser

    from vllm_xdsl.backends.triton.from_ir import spec_of_op
    from vllm_xdsl.dialects import make_context

    t = "tensor<?x64xbf16>"
    text = (f"func.func @f(%x: {t}, %r: {t}) -> ({t}, {t}) {{\n"
            f"  %o, %ro = triton.fused_add_rms_norm %x, %r {{epsilon = 1.0e-06 : f64, rounded_sum}}"
            f" : {t}, {t} -> {t}, {t}\n  func.return %o, %ro : {t}, {t}\n}}")
    module = Parser(make_context(), text).parse_module()
    (spec,) = {spec_of_op(op) for op in module.walk() if op.name == "triton.fused_add_rms_norm"}
    assert spec.rounded_sum and spec.epsilon == 1e-6


# --- real HF models -------------------------------------------------------------------------

transformers = pytest.importorskip("transformers")

# model -> (model class, config class, norms in the model (2 layers), weight element type)
HF_MODELS = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", 5, "bf16"),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", 9, "f32"),
    "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", 13, "f32"),
}


def _tiny_hf(name: str) -> torch.nn.Module:
    model_cls, config_cls, _, _ = HF_MODELS[name]
    config = getattr(transformers, config_cls)(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, vocab_size=128, max_position_embeddings=64)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(config).to(BF16).eval()


def _compile(model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # noqa: ANN202
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    torch._dynamo.reset()
    return torch.compile(model, backend="vllm_xdsl", options={"inner": "eager", "strict": True})


def _stage(tmp_path: Path, stage: str) -> str:
    (graph,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    (path,) = graph.glob(f"*-{stage}.mlir")
    return path.read_text()


@pytest.mark.parametrize("name", list(HF_MODELS))
def test_hf_residual_adds_become_rounded_sum(name: str, monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    model = _tiny_hf(name)
    before = backend.RESULTS.count
    compiled = _compile(model, monkeypatch, tmp_path)
    ids = torch.randint(0, 128, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        got, want = compiled(ids, use_cache=False).logits, model(ids, use_cache=False).logits
    assert len(backend.RESULTS.since(before)) == 1
    raised = _stage(tmp_path, "raise-native")
    fused = [ln for ln in raised.splitlines() if "= vllm.fused_add_rms_norm " in ln]
    norms = [ln for ln in raised.splitlines() if "= vllm.rms_norm " in ln]
    # Every residual add (2 per layer, each followed by a norm) is fused, as the variant.
    assert len(fused) == 4 and all("rounded_sum" in ln for ln in fused), fused
    assert len(fused) + len(norms) == HF_MODELS[name][2], raised
    weight_type = f"tensor<64x{HF_MODELS[name][3]}>"
    assert all(re.search(rf"weight\(%\S+ : {weight_type}\)", ln) for ln in fused), fused
    assert torch.equal(got, want), (got - want).abs().max()


class GemmaNormFp8(torch.nn.Module):
    """HF Gemma's RMSNorm (f32 `1 + w`), with and without the residual add, then vLLM's
    native static fp8 quant (`x.float() * scale.reciprocal()`, clamp, cast)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        from transformers.models.gemma2.modeling_gemma2 import Gemma2RMSNorm

        self.norm1, self.norm2 = Gemma2RMSNorm(hidden, 1e-6), Gemma2RMSNorm(hidden, 1e-6)
        with torch.no_grad():
            self.norm1.weight.normal_(0, 0.3)
            self.norm2.weight.normal_(0, 0.3)

    def _quant(self, y: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        q = torch.clamp(y.to(F32) * scale.reciprocal(), -448.0, 448.0).to(E4M3)
        return q.view(torch.uint8)

    def forward(self, x: torch.Tensor, r: torch.Tensor, scale: torch.Tensor):  # noqa: ANN201
        h = x + r
        return self._quant(self.norm1(x), scale), self._quant(self.norm2(h), scale), h


def test_gemma_norm_fp8_quant_fuses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    model = GemmaNormFp8(64).to(BF16)
    compiled = _compile(model, monkeypatch, tmp_path)
    x, r, scale = _x((9, 64), BF16, 11), _x((9, 64), BF16, 12), torch.tensor([0.01])
    with torch.no_grad():
        got, want = compiled(x, r, scale), model(x, r, scale)
    fused = _stage(tmp_path, "fuse-norm-quant")
    lines = [ln for ln in fused.splitlines() if "= vllm." in ln]
    assert len(lines) == 2, fused
    norm_q = next(ln for ln in lines if "vllm.rms_norm_quant" in ln)
    add_q = next(ln for ln in lines if "vllm.fused_add_rms_norm_quant" in ln)
    for ln in (norm_q, add_q):
        assert "tensor<64xf32>" in ln and "#vllm.quant<static per_tensor>" in ln, ln
    assert "rounded_sum" in add_q and "rounded_sum" not in norm_q
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)


# --- the torch op through the whole pipeline ------------------------------------------------


class CallsTheOp(torch.nn.Module):
    def forward(self, x: torch.Tensor, r: torch.Tensor, w: torch.Tensor):  # noqa: ANN201
        from vllm_xdsl import ops

        return ops.fused_add_rms_norm(x, r, w, 1e-6, rounded_sum=True)


@pytest.mark.parametrize("priority", ["fused_add_rms_norm=native", "fused_add_rms_norm=triton"])
def test_torch_op_variant_through_the_pipeline(priority: str, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """`ops.fused_add_rms_norm(..., rounded_sum=True)` is imported with the attribute,
    lowered (native decomposition or the Triton op) and exported with it: the compiled
    call equals the native bit for bit."""
    if "triton" in priority:
        pytest.importorskip("triton")
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    torch._dynamo.reset()
    compiled = torch.compile(CallsTheOp(), backend="vllm_xdsl", options={
        "inner": "eager", "strict": True, "target": "cpu", "priority": priority})
    x, r, w = _x((5, 64), BF16, 13), _x((5, 64), BF16, 14), torch.rand(64) + 0.5
    got = compiled(x, r, w)
    assert _equal(got, N.fused_add_rms_norm(x, r, w, 1e-6, True))
    assert "rounded_sum" in _stage(tmp_path, "import")
    lowered = _stage(tmp_path, "lower-dispatch")
    if "triton" in priority:
        assert "triton.fused_add_rms_norm" in lowered and "rounded_sum" in lowered, lowered
