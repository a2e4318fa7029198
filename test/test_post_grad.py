"""vllm_xdsl.post_grad_pass() as Inductor's post_grad_custom_post_pass (no vLLM needed):
the post-grad graph's norm and act-and-mul are raised, the graph is rewritten in place,
the output matches, uuid() is a str that changes with what changes the output."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest
import torch

import vllm_xdsl
from vllm_xdsl.backend_options import OptionsError
from vllm_xdsl.compile import RESULTS


class AddNormSiluMul(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(64))

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x + r
        var = h.float().pow(2).mean(-1, keepdim=True)
        y = (h.float() * torch.rsqrt(var + 1e-6)).to(x.dtype) * self.w.to(x.dtype)
        gate, up = y.chunk(2, -1)
        return torch.nn.functional.silu(gate) * up, h


@contextlib.contextmanager
def fresh() -> Iterator[None]:
    from torch._inductor.utils import fresh_cache

    torch._dynamo.reset()
    with fresh_cache():
        yield
    torch._dynamo.reset()


def compiled(model: torch.nn.Module, custom_pass: object | None) -> torch.nn.Module:
    options = {} if custom_pass is None else {"post_grad_custom_post_pass": custom_pass}
    return torch.compile(model, options=options)  # type: ignore[return-value]


def test_ops_raised_and_output_equal_to_inductor() -> None:
    torch.manual_seed(0)
    model = AddNormSiluMul().eval()
    x, r = torch.randn(8, 64), torch.randn(8, 64)
    seen: list[str] = []

    with torch.no_grad(), fresh():
        ref = compiled(model, None)(x, r)
    with torch.no_grad(), fresh():
        ours = vllm_xdsl.post_grad_pass(strict=True)
        mark = len(RESULTS)

        def spy(graph: torch.fx.Graph) -> None:
            ours(graph)
            seen.append(str(graph))

        class Both(torch._inductor.custom_graph_pass.CustomGraphPass):
            def __call__(self, graph: torch.fx.Graph) -> None:
                spy(graph)

            def uuid(self) -> str:
                return ours.uuid()

        out = compiled(model, Both())(x, r)
    (result,) = RESULTS[mark:]
    raised = result.stages[1].op_counts
    assert result.stages[1].name == "raise-native"
    assert raised["vllm.fused_add_rms_norm"] == 1 and raised["vllm.silu_and_mul"] == 1
    # Lowered to their natives on the CPU: the graph Inductor goes on with is ours.
    assert "fused_add_rms_norm -> native" in result.report
    assert len(seen) == 1 and "rsqrt" in seen[0]
    eager = model(x, r)
    for a, b, e in zip(out, ref, eager, strict=True):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(a, e)


def test_failure_leaves_graph_untouched(caplog: pytest.LogCaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm_xdsl.compile as compile_module
    from vllm_xdsl.pipeline_options import StageError

    def broken(*args: object, **kwargs: object) -> None:
        raise StageError("pass raise-native", RuntimeError("boom"))

    monkeypatch.setattr(compile_module, "transform", broken)
    graph = torch.fx.symbolic_trace(AddNormSiluMul()).graph
    before = str(graph)
    with caplog.at_level(logging.WARNING, logger="vllm_xdsl"):
        vllm_xdsl.post_grad_pass()(graph)
    assert str(graph) == before
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "boom" in warnings[0].getMessage()
    with pytest.raises(RuntimeError, match="boom"):
        vllm_xdsl.post_grad_pass(strict=True)(graph)


def test_uuid_is_str_and_covers_options(monkeypatch: pytest.MonkeyPatch) -> None:
    base = vllm_xdsl.post_grad_pass().uuid()
    assert isinstance(base, str)
    assert vllm_xdsl.post_grad_pass().uuid() == base
    others = {
        vllm_xdsl.post_grad_pass(passes=["raise-native"]).uuid(),
        vllm_xdsl.post_grad_pass(priority="native").uuid(),
        vllm_xdsl.post_grad_pass(target="cuda").uuid(),
        vllm_xdsl.post_grad_pass(strict=True).uuid(),
    }
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "native")
    others.add(vllm_xdsl.post_grad_pass().uuid())
    assert base not in others and len(others) == 5


def test_bad_option_is_one_line() -> None:
    with pytest.raises(OptionsError, match="unknown option 'pases'"):
        vllm_xdsl.post_grad_pass(pases=[])
    with pytest.raises(OptionsError, match="'inner' does not apply"):
        vllm_xdsl.post_grad_pass(inner="eager")


def test_unknown_option_lists_only_what_applies() -> None:
    # `inner` is refused by the post-grad pass, so it must not be offered as valid.
    with pytest.raises(OptionsError) as info:
        vllm_xdsl.post_grad_pass(bogus=1)
    listed = str(info.value).partition("(options: ")[2].partition(")")[0].split(", ")
    assert listed == ["passes", "priority", "target", "strict", "pass_options"]


class MulInt8Quant(torch.nn.Module):
    """A bf16 product quantized to int8 (compressed-tensors' form, raised to
    static_scaled_int8_quant): in eager the product is rounded to bf16 before the quant."""

    def forward(self, x: torch.Tensor, w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        y = x * w
        return torch.round(y.float() / s).clamp(-128, 127).to(torch.int8)


def test_emulated_precision_casts_survive_the_rewrite() -> None:
    # Inductor rounds a bf16 pointwise result where eager would only under
    # emulate_precision_casts, and only for the nodes tracing marked
    # (meta "low_precision_pointwise_barrier"): the rewritten graph must keep the marks, or
    # the product above reaches the quant in f32 and int8 values move (4 % measured).
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 256, generator=g) * 3).to(torch.bfloat16)
    w = torch.randn(256, generator=g).to(torch.bfloat16)
    s = torch.tensor([4.0 / 127.0])
    model = MulInt8Quant()
    eager = model(x, w, s)
    with torch._inductor.config.patch(emulate_precision_casts=True), fresh():
        assert int((compiled(model, None)(x, w, s) != eager).sum()) == 0  # Inductor's own
    with torch._inductor.config.patch(emulate_precision_casts=True), fresh():
        mark = len(RESULTS)
        out = compiled(model, vllm_xdsl.post_grad_pass(strict=True))(x, w, s)
    (result,) = RESULTS[mark:]  # our pass ran once, and raised the quant
    assert result.stages[1].op_counts["vllm.static_scaled_int8_quant"] == 1
    assert int((out != eager).sum()) == 0
