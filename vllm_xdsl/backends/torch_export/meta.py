"""`meta["val"]` of exported nodes, by running each node's target on fake values."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx


class FakeRunner:
    """Runs nodes on the fake values of their inputs in the input graph's fake mode.

    Without example values (IR parsed from text) there is no fake mode: nodes then get no
    `meta["val"]`, which eager execution does not need.
    """

    def __init__(self, example_values: list[Any] | None) -> None:
        self.mode = None
        if example_values is not None:
            from torch._guards import detect_fake_mode

            self.mode = detect_fake_mode(example_values)

    @property
    def enabled(self) -> bool:
        return self.mode is not None

    def run(self, node: torch.fx.Node) -> None:
        if self.mode is None or any("val" not in n.meta for n in node.all_input_nodes):
            return
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta["val"])
        with self.mode:
            node.meta["val"] = node.target(*args, **kwargs)  # type: ignore[operator]


def _expr(v: Any) -> Any:
    return v.node.expr if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) else v


def value_signature(value: Any) -> tuple[Any, ...] | None:
    """What Inductor reads from a fake value (dtype, device, symbolic sizes, strides,
    offset), comparable without adding guards; None for values it does not describe."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, value.device, tuple(map(_expr, value.shape)),
                tuple(map(_expr, value.stride())), _expr(value.storage_offset()))
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("sym", type(value), value.node.expr)
    return None
