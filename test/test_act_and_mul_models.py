"""The act-and-mul family on real model code: HF transformers MLPs built from tiny random
configs (nothing downloaded), compiled with `backend="vllm_xdsl"` and `inner="eager"`, in
f32 and bf16 (whole decoders, every act site among the others: the corpus, test_corpus.py).

Every MLP activation site is raised (SiLU for Llama / Qwen2 / Mistral, tanh GELU for the
Gemmas, erf GELU for a Gemma MLP given HF's "gelu"), with gate and up
as two tensors, and the compiled output equals eager bit for bit: the raised op's native is
torch's own activation, where the graph held Inductor's decomposition of it. An
act -> static fp8 quant (vLLM's native form) fuses into `<act>_and_mul_quant`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import (
    Gemma2Config,
    Gemma3TextConfig,
    GemmaConfig,
    LlamaConfig,
    MistralConfig,
    Qwen2Config,
)

BF16, F32 = torch.bfloat16, torch.float32
_SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, vocab_size=128,
              num_attention_heads=4, num_key_value_heads=2)
_GEMMA = dict(_SMALL, head_dim=16)


def _mlp(family: str, **overrides: object) -> torch.nn.Module:
    if family == "llama":
        from transformers.models.llama.modeling_llama import LlamaMLP
        return LlamaMLP(LlamaConfig(**_SMALL))
    if family == "qwen2":
        from transformers.models.qwen2.modeling_qwen2 import Qwen2MLP
        return Qwen2MLP(Qwen2Config(**_SMALL))
    if family == "mistral":
        from transformers.models.mistral.modeling_mistral import MistralMLP
        return MistralMLP(MistralConfig(**_SMALL))
    if family == "gemma":
        from transformers.activations import ACT2FN
        from transformers.models.gemma.modeling_gemma import GemmaMLP

        mlp = GemmaMLP(GemmaConfig(**_GEMMA))
        if "act" in overrides:  # GemmaConfig forces its tanh GELU; any HF activation fits
            mlp.act_fn = ACT2FN[overrides["act"]]
        return mlp
    if family == "gemma2":
        from transformers.models.gemma2.modeling_gemma2 import Gemma2MLP
        return Gemma2MLP(Gemma2Config(**_GEMMA))
    from transformers.models.gemma3.modeling_gemma3 import Gemma3MLP
    return Gemma3MLP(Gemma3TextConfig(**_GEMMA))


# (family, config overrides, the op every MLP becomes)
MLPS = [
    ("llama", {}, "silu_and_mul"),
    ("qwen2", {}, "silu_and_mul"),
    ("mistral", {}, "silu_and_mul"),
    ("gemma", {}, "gelu_tanh_and_mul"),  # HF gelu_pytorch_tanh
    ("gemma", {"act": "gelu"}, "gelu_and_mul"),  # HF "gelu": the exact (erf) GELU
    ("gemma2", {}, "gelu_tanh_and_mul"),
    ("gemma3", {}, "gelu_tanh_and_mul"),
]


def _compile(model: torch.nn.Module, dump: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202
    import vllm_xdsl  # noqa: F401  (registers the backend)

    torch._dynamo.reset()
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(dump))
    return torch.compile(model, backend="vllm_xdsl", dynamic=True,
                         options={"inner": "eager", "strict": True})


def _ops_after(dump: Path, stage: str) -> list[str]:
    """The vllm op names (in order) in every graph's IR after `stage`."""
    names = []
    for path in sorted(dump.glob(f"*/*-{stage}.mlir")):
        for line in path.read_text().splitlines():
            if "= vllm." in line:
                names.append(line.split("= vllm.")[1].split()[0])
    return names


def _calls_after(dump: Path, stage: str) -> set[str]:
    targets = set()
    for path in sorted(dump.glob(f"*/*-{stage}.mlir")):
        for line in path.read_text().splitlines():
            if 'torch.call "' in line:
                targets.add(line.split('torch.call "')[1].split('"')[0])
    return targets


def _bitwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype.itemsize == 1:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return a.dtype == b.dtype and torch.equal(a, b)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("family,overrides,expected", MLPS,
                         ids=[f"{f}-{e}" for f, _, e in MLPS])
def test_mlp_raised_and_bitwise(family: str, overrides: dict, expected: str, dtype: torch.dtype,
                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = _mlp(family, **overrides).to(dtype).requires_grad_(False)
    compiled = _compile(model, tmp_path, monkeypatch)
    for shape in ((2, 5, 64), (3, 7, 64)):  # rank 3, dynamic batch and tokens
        x = torch.randn(shape, dtype=dtype) * 2
        assert _bitwise(compiled(x), model(x)), f"{family} {shape}"
    ops = _ops_after(tmp_path, "raise-native")
    assert ops == [expected], ops
    raised = "\n".join(p.read_text() for p in tmp_path.glob("*/*-raise-native.mlir"))
    assert "up(" in raised  # gate_proj and up_proj: two operands
    # The decomposition is gone: nothing of the activation is left in the graph.
    left = _calls_after(tmp_path, "raise-native") & {
        "aten::silu.default", "aten::gelu.default", "aten::exp.default", "aten::erf.default",
        "aten::tanh.default", "aten::sigmoid.default"}
    assert not left, left


class ActThenStaticFp8(torch.nn.Module):
    """An HF-style MLP front (gate and up projections, act_fn(gate) * up) whose output is
    quantized as vLLM's QuantFP8.forward_native does for a static scale."""

    def __init__(self, act: str) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(64, 128, bias=False)
        self.up = torch.nn.Linear(64, 128, bias=False)
        self.act = {"silu": torch.nn.functional.silu,
                    "gelu": torch.nn.functional.gelu,
                    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}[act]
        self.register_buffer("scale", torch.tensor([0.02]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.gate(x)) * self.up(x)
        q = (y.to(torch.float32) * self.scale.reciprocal()).clamp(-448.0, 448.0)
        return q.to(torch.float8_e4m3fn)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("act", ["silu", "gelu", "gelu_tanh"])
def test_act_then_static_fp8_quant_fuses(act: str, dtype: torch.dtype, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = ActThenStaticFp8(act).to(dtype).requires_grad_(False)
    model.scale = model.scale.float()
    compiled = _compile(model, tmp_path, monkeypatch)
    x = torch.randn(2, 5, 64, dtype=dtype)
    assert _bitwise(compiled(x), model(x))
    name = {"silu": "silu_and_mul", "gelu": "gelu_and_mul", "gelu_tanh": "gelu_tanh_and_mul"}
    assert _ops_after(tmp_path, "raise-native") == [name[act], "static_scaled_fp8_quant"]
    assert _ops_after(tmp_path, "fuse-norm-quant") == [f"{name[act]}_quant"]
