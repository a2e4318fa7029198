"""Why four f32 corpus rows are not bit-exact: Inductor's `_softmax` decomposition, which
the backend traces with (as torch's `aot_eager_decomp_partition` does), not a raised op.
Compiled again without that one decomposition, the same pipeline equals eager bit for bit
(corpus.decomps); test_corpus.py asserts that of each such row (`inexact_from`, spelled in
corpus/expected.py)."""

from __future__ import annotations

import torch
from corpus import CASES
from corpus.decomps import INEXACT, without_decomposition

from vllm_xdsl.frontend.capture import capture

SOFTMAX = torch.ops.aten._softmax.default


def _targets(gm: torch.fx.GraphModule) -> set[object]:
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, -1)


def test_without_decomposition_keeps_the_op_while_active() -> None:
    x = torch.randn(3, 8)
    assert SOFTMAX not in _targets(capture(_softmax, x))
    with without_decomposition(INEXACT["softmax"]):
        assert SOFTMAX in _targets(capture(_softmax, x))
    assert SOFTMAX not in _targets(capture(_softmax, x))


def test_torch_decomp_backend_differs_from_eager_as_ours_without_passes() -> None:
    """Torch's `aot_eager_decomp_partition` (AOTAutograd with Inductor's table, eager
    inner) gives what our backend gives with no passes, bit for bit, and not eager's
    result; plain `aot_eager` (no decompositions) gives eager's."""
    built = CASES["mixtral/f32"].build(torch.float32)
    (ids,) = built.args
    outputs = {}
    for name, backend, options in [("aot_eager", "aot_eager", None),
                                   ("decomp", "aot_eager_decomp_partition", None),
                                   ("ours", "vllm_xdsl", {"inner": "eager", "passes": []})]:
        torch._dynamo.reset()
        torch._dynamo.mark_dynamic(ids, 1)
        with torch.no_grad():
            outputs[name] = torch.compile(built.model, backend=backend, options=options)(ids)
    with torch.no_grad():
        eager = built.model(ids)
    assert torch.equal(outputs["aot_eager"], eager)
    assert not torch.equal(outputs["decomp"], eager)
    assert torch.equal(outputs["ours"], outputs["decomp"])
