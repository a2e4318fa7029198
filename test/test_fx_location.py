"""An imported op's FX origin is its location: set by the importer, kept by clones, absent
on the ops a pass creates, and never printed in the IR text."""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import NameLoc, NoneAttr, StringAttr

from vllm_xdsl.dialects.fx_location import fx_location, fx_origin
from vllm_xdsl.dialects.torch import CallOp
from vllm_xdsl.frontend import capture, import_graph


def test_the_unverified_location_is_the_verified_one() -> None:
    loc = fx_location("mul_3")
    want = NameLoc(StringAttr("mul_3"), NoneAttr())
    assert loc == want and hash(loc) == hash(want)
    loc.verify()


def test_imported_ops_are_located_at_their_nodes() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2) + 1

    gm = capture(f, torch.randn(3, 4))
    names = {n.name for n in gm.graph.nodes if n.op == "call_function"}
    imported = import_graph(gm)
    calls = [op for op in imported.module.walk() if isinstance(op, CallOp)]
    assert {fx_origin(op) for op in calls} == names
    assert fx_origin(calls[0].clone()) == fx_origin(calls[0])
    fresh = CallOp.create(properties=dict(calls[0].properties), result_types=[])
    assert fx_origin(fresh) is None
    assert "loc(" not in str(imported.module)
