"""End to end: torch.compile(backend="vllm_xdsl") with priority triton first runs the
generated Triton kernels (CPU: Triton's interpreter) and matches eager within the
whole-model tolerance of OPS.md at several token counts with one compile."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

from vllm_xdsl import compile as backend  # noqa: E402
from vllm_xdsl.models import DecoderConfig, Mlp  # noqa: E402
from vllm_xdsl.models.llama import Fp8Linear, LlamaRMSNorm  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TARGET = "cuda" if DEVICE == "cuda" else "cpu"
HIDDEN = 64
TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}


class NormQuantMlp(torch.nn.Module):
    """RMSNorm -> fp8 static quant (fused into rms_norm_quant) -> linear, then an MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = LlamaRMSNorm(HIDDEN, 1e-5)
        self.proj = Fp8Linear(HIDDEN, HIDDEN)
        self.mlp = Mlp(DecoderConfig(hidden=HIDDEN, intermediate=128, fp8=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.proj(self.norm(x)))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_compile_with_triton_first(dtype):
    torch.manual_seed(0)
    model = NormQuantMlp().to(dtype).to(DEVICE)
    torch._dynamo.reset()
    before = len(backend.RESULTS)
    compiled = torch.compile(
        model,
        backend="vllm_xdsl",
        dynamic=True,
        options={"inner": "eager", "strict": True, "target": TARGET, "priority": "triton,native"},
    )
    with torch.no_grad():
        for tokens in (3, 17):
            x = torch.randn(tokens, HIDDEN, dtype=dtype, device=DEVICE)
            got, want = compiled(x).float(), model(x).float()
            tol = TOL[dtype]
            assert ((got - want).abs() <= tol + tol * want.abs()).all(), (got - want).abs().max()
    results = backend.RESULTS[before:]
    assert len(results) == 1
    stages = {s.name: s for s in results[0].stages}
    lowered = {
        k: v
        for k, v in stages["lower-dispatch"].op_counts.items()
        if k.startswith(("triton.", "vllm."))
    }
    # The fused norm+quant and silu_and_mul run as generated Triton kernels, nothing else
    # is left as a semantic op.
    assert lowered == {"triton.rms_norm_quant": 1, "triton.silu_and_mul": 1}, lowered
    assert "-> triton" in results[0].report
