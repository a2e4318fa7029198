"""vLLM's own layer classes (RMSNorm with and without residual, QuantFP8 static, per-token
and per-group, SiluAndMul, GeluAndMul) composed into a block under a default VllmConfig and
compiled with `backend="vllm_xdsl"`: every norm->quant and act->quant pair is fused, and
the output is bit-exact with the same graph under `aot_eager` (outside torch.compile vLLM
runs other kernels). GeluAndMulSparse (Gemma-3n) alone, as its vLLM IR node and as its
traced native, and FatreluAndMul (MiniCPM-S): one semantic op, bit-exact. Needs vLLM (the
vLLM test environment)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

vllm = pytest.importorskip("vllm")

from vllm.config import VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.model_executor.layers.activation import (  # noqa: E402
    FatreluAndMul,
    GeluAndMul,
    GeluAndMulSparse,
    SiluAndMul,
)
from vllm.model_executor.layers.layernorm import RMSNorm  # noqa: E402
from vllm.model_executor.layers.quantization.input_quant_fp8 import QuantFP8  # noqa: E402
from vllm.model_executor.layers.quantization.utils.quant_utils import GroupShape  # noqa: E402

H, GS = 128, 64
BF16 = torch.bfloat16
FUSED = ("rms_norm_quant", "fused_add_rms_norm_quant", "silu_and_mul_quant", "gelu_and_mul_quant")


class Block(torch.nn.Module):
    """Three norms and two act-and-muls, each feeding one of vLLM's QuantFP8 schemes."""

    def __init__(self) -> None:
        super().__init__()
        self.norms = torch.nn.ModuleList(RMSNorm(H, eps=1e-6) for _ in range(6))
        self.static = QuantFP8(static=True, group_shape=GroupShape.PER_TENSOR)
        self.token = QuantFP8(static=False, group_shape=GroupShape.PER_TOKEN)
        self.group = QuantFP8(static=False, group_shape=GroupShape(1, GS))
        self.silu, self.gelu = SiluAndMul(), GeluAndMul()
        self.register_buffer("scale", torch.tensor([0.05], dtype=torch.float32))

    def forward(self, x: torch.Tensor, r: torch.Tensor, up: torch.Tensor) -> tuple:
        outs: list[torch.Tensor] = []
        quants = (lambda y: self.static(y, self.scale), self.token, self.group)
        for i, quant in enumerate(quants):  # without a residual
            outs += _flat(quant(self.norms[i](x)))
        for i, quant in enumerate(quants):  # with one
            y, r = self.norms[3 + i](x, r)
            outs += [*_flat(quant(y)), r]
        outs += _flat(self.static(self.silu(up), self.scale))
        outs += _flat(self.group(self.gelu(up)))
        return tuple(outs)


PAIRS = 6 + 2


def _flat(v: object) -> list[torch.Tensor]:
    return [t for t in (v if isinstance(v, tuple) else (v,)) if isinstance(t, torch.Tensor)]


def _inputs(t: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(t)
    return tuple(torch.randn(t, w, generator=g).to(BF16) for w in (H, H, 2 * H))


def _fused_counts(dump: Path) -> Counter[str]:
    """vllm ops in the IR after the last pass of each compiled graph."""
    counts: Counter[str] = Counter()
    for graph in sorted(p for p in dump.iterdir() if p.is_dir()):
        last = sorted(graph.glob("*.mlir"))[-2]  # the stage before lower-dispatch
        for line in last.read_text().splitlines():
            if "= vllm." in line:
                counts[line.split("= vllm.")[1].split()[0]] += 1
    return counts


@pytest.mark.parametrize("dynamic", ["static", "mark_dynamic"])
def test_vllm_layers_fused_and_bit_exact(dynamic: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    with set_current_vllm_config(VllmConfig()):
        block = Block().to(BF16)
        block.scale = block.scale.float()
        torch._dynamo.reset()
        # inner="eager": the pipeline's graph run as aot_eager runs its own (Inductor's
        # codegen of the same graph moves a few fp8 values by a step on the CPU).
        ours = torch.compile(block, backend="vllm_xdsl", fullgraph=True, dynamic=False,
                             options={"inner": "eager"})
        ref = torch.compile(block, backend="aot_eager", fullgraph=True, dynamic=False)
        for t in (5, 17):
            args = _inputs(t)
            if dynamic == "mark_dynamic":
                for a in args:
                    torch._dynamo.mark_dynamic(a, 0)
            with torch.no_grad():  # each its own copy: the block writes its inputs
                got = ours(*[a.clone() for a in args])
                expected = ref(*[a.clone() for a in args])
            for i, (e, g) in enumerate(zip(expected, got, strict=True)):
                assert e.dtype == g.dtype and e.shape == g.shape, i
                assert torch.equal(e.view(torch.uint8), g.view(torch.uint8)) if e.element_size() == 1 \
                    else torch.equal(e, g), (t, i)
    counts = _fused_counts(tmp_path)
    graphs = sum(1 for p in tmp_path.iterdir() if p.is_dir())
    assert graphs >= 1
    fused = sum(counts[k] for k in FUSED)
    assert fused == PAIRS * graphs, f"{fused} of {PAIRS * graphs} pairs fused: {dict(counts)}"
    unfused_quants = [k for k in counts if k.endswith("_quant") and k not in FUSED]
    assert not unfused_quants, dict(counts)


@pytest.mark.parametrize("wrap", [False, True], ids=["native", "vllm_ir"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_mul_sparse_layer_raised_and_bit_exact(
        wrap: bool, approximate: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """wrap=False: vLLM IR's native traced, the CPU default; True: the vllm_ir node."""
    from vllm import ir

    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    x = torch.randn(9, 2 * H, generator=torch.Generator().manual_seed(1)).to(BF16)
    with set_current_vllm_config(VllmConfig()), ir.enable_torch_wrap(wrap):
        layer = GeluAndMulSparse(activation_sparsity=0.95, approximate=approximate)
        torch._dynamo.reset()
        ours = torch.compile(layer, backend="vllm_xdsl", fullgraph=True, dynamic=False,
                             options={"inner": "eager", "strict": True})
        ref = torch.compile(layer, backend="aot_eager", fullgraph=True, dynamic=False)
        with torch.no_grad():
            assert torch.equal(ours(x), ref(x))
    assert _fused_counts(tmp_path) == {"gelu_and_mul_sparse": 1}


@pytest.mark.parametrize("threshold", [0.0, 0.1])
def test_fatrelu_and_mul_layer_raised_and_bit_exact(
        threshold: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's CPU build runs FatreluAndMul's native (it has no _C kernel for it); our
    native is that function, bit for bit, and the compiled layer is one op."""
    from vllm_xdsl import ops

    monkeypatch.setenv("VLLM_XDSL_DUMP_DIR", str(tmp_path))
    x = torch.randn(9, 2 * H, generator=torch.Generator().manual_seed(2)).to(BF16)
    x[0, :3] = torch.tensor([float("nan"), 0.1, -0.0])
    with set_current_vllm_config(VllmConfig()):
        layer = FatreluAndMul(threshold=threshold)
        want = layer.forward_native(x)
        assert torch.equal(ops.fatrelu_and_mul.native(x, threshold).nan_to_num(7.0),
                           want.nan_to_num(7.0))
        torch._dynamo.reset()
        ours = torch.compile(layer, backend="vllm_xdsl", fullgraph=True, dynamic=False,
                             options={"inner": "eager", "strict": True})
        ref = torch.compile(layer, backend="aot_eager", fullgraph=True, dynamic=False)
        with torch.no_grad():
            assert torch.equal(ours(x).nan_to_num(7.0), ref(x).nan_to_num(7.0))
    assert _fused_counts(tmp_path) == {"fatrelu_and_mul": 1}
