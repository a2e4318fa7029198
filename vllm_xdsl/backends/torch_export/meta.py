"""`meta["val"]` of exported nodes, by running each node's target on fake values."""

from __future__ import annotations

from collections.abc import Callable
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
        # Outputs of this project's ops per (target, input signature): every layer calls the
        # same fused ops on inputs of the same metadata, and running a native on fake
        # tensors costs ~3 ms; a fresh empty value of the same metadata costs ~0.05 ms.
        self._ours: dict[tuple[Any, ...], Any] = {}
        # Gives a node an already computed fake value, if it knows one (reuse.py).
        self.take_known: Callable[[torch.fx.Node], bool] = lambda node: False
        if example_values is not None:
            from torch._guards import detect_fake_mode

            self.mode = detect_fake_mode(example_values)

    @property
    def enabled(self) -> bool:
        return self.mode is not None

    @property
    def has_unbacked_symbols(self) -> bool:
        """Whether the graph's shape env has created a data-dependent symbol (its values
        may then hold one); static shapes have no shape env and no symbols."""
        env = self.mode.shape_env if self.mode is not None else None
        return env is not None and bool(env.unbacked_symint_counter
                                        or env.unbacked_symfloat_counter)

    def run(self, node: torch.fx.Node) -> None:
        if self.mode is None or any("val" not in n.meta for n in node.all_input_nodes):
            return
        if self.take_known(node):
            return
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta["val"])
        target = node.target
        assert callable(target), f"{node}: a call_function target is callable"
        key = _memo_key(target, args, kwargs)
        with self.mode:
            if key is not None and key in self._ours:
                node.meta["val"] = _fresh_like(self._ours[key])
                return
            node.meta["val"] = target(*args, **kwargs)
        if key is not None:
            self._ours[key] = node.meta["val"]


def _memo_key(target: Any, args: Any, kwargs: Any) -> tuple[Any, ...] | None:
    """A key for the fake outputs of one of this project's ops (`vllm_xdsl*` namespaces:
    functional, with output metadata that depends only on the inputs' metadata and the
    literal arguments), or None for any other target or an unhashable argument."""
    if not getattr(target, "namespace", "").startswith("vllm_xdsl"):
        return None

    def sig(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(sig(x) for x in v)
        return value_signature(v) or v

    key = (target, sig(args), tuple(sorted((k, sig(v)) for k, v in kwargs.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _fresh_like(value: Any) -> Any:
    """New fake tensors with the metadata of `value` (no shared storage)."""
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(
            value.shape, value.stride(), dtype=value.dtype, device=value.device
        )
    if isinstance(value, (list, tuple)):
        return type(value)(_fresh_like(v) for v in value)
    return value


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
