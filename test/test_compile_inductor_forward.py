"""With inner="inductor", the backend hands our graph to Inductor's own forward step, as
plain `backend="inductor"` does (issue 17): joint-graph passes on the inference graph,
`is_inference=True`, so that the post-grad passes have nothing left to rewrite and
re-propagate fake tensors through (161 of 279 nodes of a 2-layer Llama before)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

transformers = pytest.importorskip("transformers")


def _tiny_llama() -> torch.nn.Module:
    cfg = transformers.LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
        use_cache=False,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()


def test_inductor_inner_runs_inductors_forward_step(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._inductor.compile_fx as compile_fx
    import torch._inductor.fx_utils as fx_utils

    import vllm_xdsl.compile as backend

    updated: list[int] = []
    inference_flags: list[bool] = []
    original_update = fx_utils.FakeTensorUpdater.incremental_update
    original_inner = compile_fx.compile_fx_inner

    def counting_update(self: Any) -> int:
        n = original_update(self)
        updated.append(n)
        return n

    def recording_inner(*args: Any, **kwargs: Any) -> Any:
        inference_flags.append(kwargs.get("is_inference", False))
        return original_inner(*args, **kwargs)

    monkeypatch.setattr(fx_utils.FakeTensorUpdater, "incremental_update", counting_update)
    monkeypatch.setattr(compile_fx, "compile_fx_inner", recording_inner)
    model = _tiny_llama()
    ids = torch.randint(0, 64, (1, 8))
    torch._dynamo.reset()
    mark = len(backend.RESULTS)
    compiled = torch.compile(model, backend="vllm_xdsl", options={"inner": "inductor"},
                             dynamic=True, fullgraph=True)
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False):
        got = compiled(ids, use_cache=False).logits
        want = model(ids, use_cache=False).logits
    results = backend.RESULTS[mark:]
    assert len(results) == 1 and results[0].stages[-1].name == "lower-dispatch"
    raised = {s.name: s.op_counts for s in results[0].stages}["raise-native"]
    assert raised["vllm.rms_norm"] >= 1  # our passes did change the graph
    assert inference_flags == [True]
    assert updated and all(n == 0 for n in updated), updated
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


class _NormMlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(32))
        self.up = torch.nn.Linear(32, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        h = x * torch.rsqrt(var + 1e-6) * self.weight
        return torch.nn.functional.silu(self.up(h))


def test_training_with_inductor_inner_matches_eager() -> None:
    """With grad, the forward goes through Inductor's forward step with is_inference=False
    (no joint-graph passes there: a partitioned forward), the backward through
    compile_fx_inner; gradients match eager."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, twin = _NormMlp(), _NormMlp()
    twin.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="vllm_xdsl", dynamic=True,
                             options={"inner": "inductor", "strict": True})
    x = torch.randn(6, 32)
    compiled(x).square().sum().backward()
    twin(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4, msg=name)
