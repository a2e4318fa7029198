"""raise-native on quantization as real sources write it, compiled end to end with
`torch.compile(backend="vllm_xdsl", options={"inner": "eager", "strict": True})`: every
quant site is raised (as its exact variant, docs/OPS.md "Variants") and the compiled
output equals eager bit for bit.

- compressed-tensors 0.20 presets FP8, FP8_DYNAMIC, W8A8 and FP8_BLOCK on a tiny
  random-config transformers Llama of two layers, with static shapes (under `dynamic=True`
  the corpus compiles them, and test_corpus.py checks that they raise the same variants).
  Stock
  compressed-tensors breaks the graph at every Linear (`patch_attr`), so each quantized
  Linear's forward here calls compressed-tensors' own `forward_quantize` on its input and
  then `F.linear`.
- vLLM's `QuantFP8.forward_native` (vllm/model_executor/layers/quantization/
  input_quant_fp8.py), written out here as vLLM computes it: static, dynamic per token
  (with and without scale_ub), per tensor, per group (ue8m0, column-major scales), on
  [T, H] and [B, T, H] activations, after an RMSNorm (so fusion is counted too).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

BF16, F32 = torch.bfloat16, torch.float32
FP8 = torch.float8_e4m3fn
FMAX = 448.0
MIN_SCALE = 1.0 / (FMAX * 512.0)
_OP = re.compile(r"= (vllm\.[a-z0-9_]+)")


def _compiled_ops(model: torch.nn.Module, inputs: tuple, tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch, priority: str | None = None,
                  dynamic: bool | None = None) -> tuple[dict[str, int], dict[str, int], bool]:
    """(vllm ops after raise-native, after fuse-norm-quant, compiled output == eager)."""
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "")
    torch._dynamo.reset()
    options: dict[str, object] = {"inner": "eager", "strict": True}
    if priority is not None:
        options["priority"] = priority
    with torch.no_grad():
        want = model(*inputs)
        compiled = torch.compile(model, backend="vllm_xdsl", options=options, dynamic=dynamic)
        got = compiled(*inputs)
    counts = []
    for stage in ("01-raise-native.mlir", "02-fuse-norm-quant.mlir"):
        found: dict[str, int] = {}
        for f in sorted(tmp_path.glob(f"*/{stage}")):
            for name in _OP.findall(f.read_text()):
                found[name] = found.get(name, 0) + 1
        counts.append(found)
    want_t = want.logits if hasattr(want, "logits") else want
    got_t = got.logits if hasattr(got, "logits") else got
    same = all(torch.equal(a.float(), b.float()) for a, b in zip(_flat(want_t), _flat(got_t),
                                                                strict=True))
    return counts[0], counts[1], same


def _flat(t: object) -> list[torch.Tensor]:
    return list(t) if isinstance(t, tuple) else [t]  # type: ignore[list-item]


def _quants(counts: dict[str, int]) -> int:
    return sum(n for k, n in counts.items() if k.endswith("_quant"))


# --- compressed-tensors -----------------------------------------------------------------


def _ct_llama(preset: str, hidden: int = 64, intermediate: int = 128
              ) -> tuple[torch.nn.Module, int]:
    ct = pytest.importorskip("compressed_tensors.quantization")
    transformers = pytest.importorskip("transformers")
    from compressed_tensors.quantization.lifecycle.forward import forward_quantize

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).to(BF16).eval()
    config = ct.QuantizationConfig(
        config_groups={"group_0": ct.preset_name_to_scheme(preset, ["Linear"])},
        ignore=["lm_head"], quantization_status=ct.QuantizationStatus.FROZEN)
    ct.apply_quantization_config(model, config, show_progress=False)
    sites = 0
    for module in model.modules():
        scheme = getattr(module, "quantization_scheme", None)
        if scheme is None or scheme.input_activations is None:
            continue
        sites += 1
        for name, value in (("input_scale", 0.011), ("weight_scale", 0.002)):
            if (p := getattr(module, name, None)) is not None:
                p.data.fill_(value)  # calibrated scales, as a checkpoint would hold

        def forward(x: torch.Tensor, m: torch.nn.Module = module) -> torch.Tensor:
            x = forward_quantize(m, x, "input", m.quantization_scheme.input_activations)
            return F.linear(x, m.weight, m.bias)

        module.forward = forward
    return model, sites


@pytest.mark.parametrize("provider", ["native", "triton"])
@pytest.mark.parametrize("preset, op", [
    ("FP8", "vllm.static_scaled_fp8_quant"),
    ("FP8_DYNAMIC", "vllm.dynamic_per_token_scaled_fp8_quant"),
    ("W8A8", "vllm.dynamic_per_token_scaled_int8_quant"),
])
def test_compressed_tensors_presets(preset: str, op: str, provider: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`triton`: every quant and fused quant runs as a Triton kernel (interpreted)."""
    if provider == "triton":
        pytest.importorskip("triton")
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    model, sites = _ct_llama(preset)
    assert sites == 14  # 2 layers x (q, k, v, o, gate, up, down)
    ids = torch.randint(0, 128, (1, 7), generator=torch.Generator().manual_seed(0))
    priority = None if provider == "native" else ";".join(
        f"{name}=triton!" for name in (op.removeprefix("vllm."), "rms_norm_quant",
                                        "fused_add_rms_norm_quant", "silu_and_mul_quant"))
    raised, fused, same = _compiled_ops(model, (ids,), tmp_path, monkeypatch, priority)
    # The 4 bf16 residual adds are raised with the norms after them (rounded_sum).
    assert raised == {op: sites, "vllm.rms_norm": 1, "vllm.fused_add_rms_norm": 4,
                      "vllm.silu_and_mul": 2}, raised
    # q/k/v and gate/up read a norm: 10 quants fuse with it (the first layer's input norm,
    # then the fused adds); down reads the SiLU-and-mul and fuses with it; o stays.
    assert fused.get("vllm.rms_norm_quant", 0) == 3, fused
    assert fused.get("vllm.fused_add_rms_norm_quant", 0) == 7, fused
    assert fused.get("vllm.silu_and_mul_quant", 0) == 2 and fused.get(op) == 2, fused
    assert same
    if provider == "triton":
        report = "".join(f.read_text() for f in tmp_path.glob("*/dispatch-report.txt"))
        assert report.count("-> triton") == 14, report


@pytest.mark.parametrize("provider", ["native", "triton"])
def test_compressed_tensors_fp8_block(provider: str, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """FP8_BLOCK quantizes activations per token group of 128 (dynamic, bf16 scales, a zero
    point per group): compressed-tensors reduces `x.unflatten(-1, (G, 128))` with
    keepdim=False and divides by `scale.unsqueeze(-1)`; raised as per_token_group_fp8_quant
    with the FP8_DYNAMIC variant and a per-group zero point. Hidden 128 (one group) and
    intermediate 256 (two groups: down_proj, fused with the SiLU-and-mul). `triton`: every
    quant and fused quant runs as a Triton kernel (interpreted), zero points per group."""
    if provider == "triton":
        pytest.importorskip("triton")
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    model, sites = _ct_llama("FP8_BLOCK", hidden=128, intermediate=256)
    assert sites == 14
    ids = torch.randint(0, 128, (1, 7), generator=torch.Generator().manual_seed(0))
    priority = None if provider == "native" else ";".join(
        f"{name}=triton!" for name in ("per_token_group_fp8_quant", "rms_norm_quant",
                                        "fused_add_rms_norm_quant", "silu_and_mul_quant"))
    raised, fused, same = _compiled_ops(model, (ids,), tmp_path, monkeypatch, priority)
    op = "vllm.per_token_group_fp8_quant"
    assert raised == {op: sites, "vllm.rms_norm": 1, "vllm.fused_add_rms_norm": 4,
                      "vllm.silu_and_mul": 2}, raised
    assert fused.get("vllm.rms_norm_quant", 0) == 3, fused
    assert fused.get("vllm.fused_add_rms_norm_quant", 0) == 7, fused
    assert fused.get("vllm.silu_and_mul_quant", 0) == 2 and fused.get(op) == 2, fused
    text = "".join(f.read_text() for f in tmp_path.glob("*/01-raise-native.mlir"))
    assert text.count("quant_variant<quotient bf16 scale bf16 zero_eps 7.812500e-03>") == 14
    # Nothing of compressed-tensors' scale computation is left: the dequant reads the op's.
    assert "aten::amax" not in text and "aten::amin" not in text
    assert same
    if provider == "triton":
        report = "".join(f.read_text() for f in tmp_path.glob("*/dispatch-report.txt"))
        assert report.count("-> triton") == 14, report


class CTGroupQuant(torch.nn.Module):
    """RMSNorm, then compressed-tensors' dynamic GROUP fake quant written out as 0.20 computes
    it (compute_dynamic_scales_and_zp, calculate_qparams, _process_group,
    _quantize_dequantize); `scale_of` = "other" takes the scale from another tensor's
    groups (x * 2), a form that is no quant of x: it must stay as it is."""

    def __init__(self, hidden: int, scale_of: str = "x") -> None:
        super().__init__()
        self.norm, self.scale_of = _Norm(hidden), scale_of

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x)
        src = x if self.scale_of == "x" else x * 2
        value = src.unflatten(-1, (x.shape[-1] // 32, 32))
        mn, mx = torch.amin(value, dim=-1), torch.amax(value, dim=-1)
        mn, mx = torch.min(mn, torch.zeros_like(mn)), torch.max(mx, torch.zeros_like(mx))
        bit_range = torch.tensor(FMAX) - torch.tensor(-FMAX)
        scale = torch.max(torch.abs(mn), torch.abs(mx)) / (bit_range.to(mx.dtype) / 2)
        zp = torch.zeros(scale.shape, dtype=mn.dtype)
        eps = torch.tensor(torch.finfo(scale.dtype).eps, dtype=scale.dtype)
        scale = torch.where(scale == 0, eps, scale)
        zp = torch.clamp(zp.float(), -FMAX, FMAX).to(zp.dtype).to(FP8)
        xg, sg, zg = x.unflatten(-1, (x.shape[-1] // 32, 32)), scale.unsqueeze(-1), zp.unsqueeze(-1)
        scaled = xg / sg + zg.to(x.dtype)
        q = torch.clamp(scaled, torch.tensor(-FMAX), torch.tensor(FMAX)).to(FP8)
        return ((q.to(sg.dtype) - zg.to(sg.dtype)) * sg).flatten(-2).to(x.dtype)


@pytest.mark.parametrize("shape", [(7, 64), (2, 5, 64)], ids=["2d", "3d"])
def test_compressed_tensors_group_form(shape: tuple[int, ...], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Two groups per row: raised with a [..., 2] zero point and fused with the norm."""
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=BF16) * 3
    raised, fused, same = _compiled_ops(CTGroupQuant(64).to(BF16), (x,), tmp_path, monkeypatch)
    assert raised == {"vllm.rms_norm": 1, "vllm.per_token_group_fp8_quant": 1}, raised
    assert fused == {"vllm.rms_norm_quant": 1}, fused
    assert same


def test_group_scale_of_another_tensor_is_not_raised(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    x = torch.randn(7, 64, dtype=BF16) * 3
    model = CTGroupQuant(64, scale_of="other").to(BF16)
    raised, _, same = _compiled_ops(model, (x,), tmp_path, monkeypatch)
    assert raised == {"vllm.rms_norm": 1}, raised
    assert same


# --- vLLM QuantFP8.forward_native -------------------------------------------------------


class _Norm(torch.nn.Module):
    """vLLM's RMSNorm.forward_static (no residual), so the quant can fuse with it."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(hidden) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.to(F32)
        var = xf.pow(2).mean(dim=-1, keepdim=True)
        return (xf * torch.rsqrt(var + 1e-6)).to(x.dtype) * self.weight


class QuantFP8Native(torch.nn.Module):
    """RMSNorm then vLLM's QuantFP8.forward_native; returns (q as f32, scale)."""

    def __init__(self, hidden: int, kind: str, ue8m0: bool = False, column_major: bool = False,
                 scale_ub: bool = False) -> None:
        super().__init__()
        self.norm = _Norm(hidden)
        self.kind, self.ue8m0, self.column_major = kind, ue8m0, column_major
        self.register_buffer("scale", torch.tensor([0.02], dtype=F32))
        self.register_buffer("scale_ub", torch.tensor([1.5], dtype=F32) if scale_ub else None)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.norm(x)
        if self.kind == "group":
            q, s = self._group(x)
            return q.to(F32), s
        if self.kind == "static":
            scale = self.scale
        elif self.kind == "token":
            x_max, _ = x.abs().max(dim=-1)
            x_max = x_max.unsqueeze(-1).to(F32)
            if self.scale_ub is not None:
                x_max = x_max.clamp(max=self.scale_ub)
            scale = (x_max / FMAX).clamp(min=MIN_SCALE)
        else:
            x_max = x.abs().max().unsqueeze(-1).to(F32)
            scale = (x_max / FMAX).clamp(min=MIN_SCALE)
        out = x.to(F32) * scale.to(F32).reciprocal()
        return out.clamp(-FMAX, FMAX).to(FP8).to(F32), scale

    def _group(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        orig_shape, groups, gs = x.shape, x.shape[-1] // 32, 32
        x_grouped = x.view(-1, groups, gs)
        absmax = x_grouped.abs().max(dim=-1, keepdim=True)[0].float()
        scales_raw = absmax / FMAX
        if self.ue8m0:
            scales_raw = torch.exp2(torch.ceil(torch.log2(scales_raw)))
        scales = scales_raw.clamp(min=MIN_SCALE)
        x_quant = (x_grouped / scales).clamp(-FMAX, FMAX).to(FP8)
        x_quant = x_quant.view(-1, groups * gs).view(orig_shape)
        scales = scales.squeeze(-1).reshape(orig_shape[:-1] + (groups,))
        if self.column_major:
            scales = scales.transpose(-2, -1).contiguous().transpose(-1, -2)
        return x_quant, scales


VLLM_CASES = {
    "static": (dict(kind="static"), "vllm.static_scaled_fp8_quant", True),
    "per_token": (dict(kind="token"), "vllm.dynamic_per_token_scaled_fp8_quant", True),
    "per_token_ub": (dict(kind="token", scale_ub=True),
                     "vllm.dynamic_per_token_scaled_fp8_quant", True),
    # Dynamic per tensor needs a global max before any row: raised, never fused.
    "per_tensor": (dict(kind="tensor"), "vllm.dynamic_scaled_fp8_quant", False),
    "group": (dict(kind="group"), "vllm.per_token_group_fp8_quant", True),
    "group_ue8m0_colmajor": (dict(kind="group", ue8m0=True, column_major=True),
                             "vllm.per_token_group_fp8_quant", True),
}


@pytest.mark.parametrize("shape", [(7, 64), (2, 5, 64)], ids=["2d", "3d"])
@pytest.mark.parametrize("name", list(VLLM_CASES))
def test_vllm_quant_fp8_native(name: str, shape: tuple[int, ...], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs, op, fuses = VLLM_CASES[name]
    torch.manual_seed(0)
    model = QuantFP8Native(shape[-1], **kwargs).to(BF16)
    model.scale = model.scale.float()  # vLLM keeps its scales in f32
    if model.scale_ub is not None:
        model.scale_ub = model.scale_ub.float()
    x = torch.randn(shape, dtype=BF16) * 3
    raised, fused, same = _compiled_ops(model, (x,), tmp_path, monkeypatch)
    assert raised == {"vllm.rms_norm": 1, op: 1}, raised
    if fuses:
        assert _quants(fused) == 1 and "vllm.rms_norm" not in fused, fused
    assert same


class CTQuantLinear(torch.nn.Module):
    """RMSNorm, then a Linear whose input compressed-tensors' own `forward_quantize`
    quantizes (the preset's input scheme; calibrated weight scale, as a checkpoint holds)."""

    def __init__(self, preset: str, hidden: int) -> None:
        super().__init__()
        ct = pytest.importorskip("compressed_tensors.quantization")
        self.norm, self.linear = _Norm(hidden), torch.nn.Linear(hidden, hidden, bias=False)
        config = ct.QuantizationConfig(
            config_groups={"group_0": ct.preset_name_to_scheme(preset, ["Linear"])},
            quantization_status=ct.QuantizationStatus.FROZEN)
        ct.apply_quantization_config(self, config, show_progress=False)
        self.linear.weight_scale.data.fill_(0.002)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from compressed_tensors.quantization.lifecycle.forward import forward_quantize

        m = self.linear
        x = forward_quantize(m, self.norm(x), "input", m.quantization_scheme.input_activations)
        return F.linear(x, m.weight)


@pytest.mark.parametrize("preset, op", [
    ("FP8_DYNAMIC", "vllm.dynamic_per_token_scaled_fp8_quant"),
    ("W8A8", "vllm.dynamic_per_token_scaled_int8_quant"),
])
def test_compressed_tensors_token_quant_symbolic_leading_dims(
        preset: str, op: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under dynamic=True with a batch above 1 both leading dims of the activation are
    symbolic (Dynamo specializes only size-1 dims): the per-token scale [B, T, 1] that the
    dequant reads is the op's [B*T, 1] scales reshaped by x's own sizes, and the quant
    still fuses with the norm. (compressed-tensors' TOKEN strategy reduces all dims but the
    first two: on a 4-D activation it is no per-row quant, so 3-D is its case.)"""
    torch.manual_seed(0)
    model = CTQuantLinear(preset, 64).to(BF16)
    x = torch.randn(2, 13, 64, dtype=BF16) * 3
    raised, fused, same = _compiled_ops(model, (x,), tmp_path, monkeypatch, dynamic=True)
    assert raised == {"vllm.rms_norm": 1, op: 1}, raised
    assert fused == {"vllm.rms_norm_quant": 1}, fused
    text = "".join(f.read_text() for f in tmp_path.glob("*/01-raise-native.mlir"))
    assert "aten::amax" not in text and "aten::amin" not in text  # the op's scales are read
    assert same


@pytest.mark.parametrize("name", ["per_token", "per_token_ub", "group"])
def test_vllm_quant_fp8_native_symbolic_leading_dims(name: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Three symbolic leading dims, all marked dynamic (dynamic=True would also make FMAX,
    a Python float of this module, a graph input: no constant range): raised, fused, exact.
    Per group, vLLM views x as [-1, G, gs]: one dynamic dim there."""
    kwargs, op, _ = VLLM_CASES[name]
    torch.manual_seed(0)
    model = QuantFP8Native(64, **kwargs).to(BF16)
    model.scale = model.scale.float()
    if model.scale_ub is not None:
        model.scale_ub = model.scale_ub.float()
    x = torch.randn(2, 3, 5, 64, dtype=BF16) * 3
    torch._dynamo.mark_dynamic(x, (0, 1, 2))
    raised, fused, same = _compiled_ops(model, (x,), tmp_path, monkeypatch)
    assert raised == {"vllm.rms_norm": 1, op: 1}, raised
    assert _quants(fused) == 1 and "vllm.rms_norm" not in fused, fused
    assert same
