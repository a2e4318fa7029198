"""Fake values the input graph already computed, for exported nodes that recompute them.

On a target where every op lowers to torch ops (cpu: the native provider), most nodes a
pass creates are the very nodes it raised: the same target and literals on the same
values. Their `meta["val"]` is then the input graph's, and taking it saves a fake run
(~0.7 ms each on a symbolic-shaped graph: most of export's time at 32 layers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from .meta import value_signature


def node_key(node: torch.fx.Node, by_identity: bool) -> tuple[Any, ...] | None:
    """What a call_function node's output metadata depends on: its target, its literals
    (typed: 1, 1.0 and True differ) and its inputs' fake values, by identity or by their
    value_signature; None if an input has no fake value or a literal is not hashable.

    By signature only for targets with a schema whose outputs alias no input: a view's
    value shares its input's storage, so only the view of the very same value may take it.
    """
    if node.op != "call_function":
        return None
    if not by_identity:
        schema = getattr(node.target, "_schema", None)
        if schema is None or any(r.alias_info is not None for r in schema.returns):
            return None
    if any("val" not in n.meta for n in node.all_input_nodes):
        return None
    try:
        key = (node.target, by_identity,
               _freeze((node.args, node.kwargs), _by_value if by_identity else _by_signature))
        hash(key)
    except TypeError:
        return None
    return key


def _by_value(node: torch.fx.Node) -> Any:
    return id(node.meta["val"])


def _by_signature(node: torch.fx.Node) -> Any:
    signature = value_signature(node.meta["val"])
    if signature is None:
        raise TypeError("no signature")
    return signature


def _freeze(value: Any, of_node: Callable[[torch.fx.Node], Any]) -> Any:
    """A hashable key of an argument structure; nodes as `of_node` says, literals typed."""
    if isinstance(value, torch.fx.Node):
        return ("node", of_node(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v, of_node) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _freeze(v, of_node)) for k, v in value.items())))
    if isinstance(value, (bool, int, float, str)) or value is None:
        return (type(value).__name__, repr(value))  # repr: -0.0 is not 0.0, nan is nan
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return value
    raise TypeError(f"no key for literal {type(value).__name__}")


def existing_call(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> torch.fx.Node | None:
    """A node already in the graph calling pure `target` on the same nodes and literals.

    A pass that lowers an op recomputes values the graph may have (a scale's cast to fp32
    that the dequantization next to it casts too); AOTAutograd hands Inductor a graph
    without such repeats, and sharing the node also saves its fake run. Only the users of
    the argument node with the fewest users are searched."""
    if not _is_pure(target):
        return None
    inputs: list[torch.fx.Node] = []
    torch.fx.node.map_arg((args, kwargs), inputs.append)
    if not inputs:
        return None
    try:
        key = _freeze((args, kwargs), _itself)
    except TypeError:
        return None
    for user in min(inputs, key=lambda n: len(n.users)).users:
        if user.op == "call_function" and user.target is target:
            try:
                if _freeze((user.args, user.kwargs), _itself) == key:
                    return user
            except TypeError:
                continue
    return None


def _itself(node: torch.fx.Node) -> Any:
    return node


_PURE: dict[Any, bool] = {}


def _is_pure(target: Any) -> bool:
    """A functional, deterministic aten/prims overload of one result (two calls are one
    value); not an uninitialised allocation (`empty*`: two are two buffers)."""
    if target not in _PURE:
        _PURE[target] = (
            isinstance(target, torch._ops.OpOverload)
            and target.namespace in ("aten", "prims") and not target._schema.is_mutable
            and torch.Tag.nondeterministic_seeded not in target.tags
            and len(target._schema.returns) == 1
            and not target._schema.name.partition("::")[2].startswith(("empty", "new_empty"))
        )
    return _PURE[target]


class SourceValues:
    """The input graph's call_function nodes that no exported op was imported from, by
    node_key (the same values first, else values of the same metadata). Each source value
    goes to at most one new node: two nodes sharing one fake value would look like
    aliases to Inductor."""

    def __init__(
        self, graph: torch.fx.Graph | None, live: set[torch.fx.Node], unbacked: bool = True
    ) -> None:
        """`unbacked`: whether the graph's values may hold data-dependent symbols (False
        when its shape env has created none: nothing to look for)."""
        self._by_key: dict[tuple[Any, ...], list[torch.fx.Node]] = {}
        self._taken: set[torch.fx.Node] = set()
        if graph is None:
            return
        for node in graph.nodes:
            if node in live or "val" not in node.meta or (
                unbacked and _has_unbacked(node.meta["val"])
            ):
                continue
            for by_identity in (True, False):
                key = node_key(node, by_identity)
                if key is not None:
                    self._by_key.setdefault(key, []).append(node)
        for sources in self._by_key.values():
            sources.reverse()  # pop() takes them in graph order

    def take(self, node: torch.fx.Node) -> bool:
        """Give `node` the fake value of a source node computing the same, if any."""
        if not self._by_key:
            return False
        for by_identity in (True, False):
            key = node_key(node, by_identity)
            sources = self._by_key.get(key) if key is not None else None
            while sources:
                source = sources.pop()
                if source not in self._taken:
                    self._taken.add(source)
                    node.meta["val"] = source.meta["val"]
                    return True
        return False


def _has_unbacked(value: Any) -> bool:
    """Whether a value's metadata holds a data-dependent symbol: a node that takes it
    would share that runtime value."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    try:
        return bool(free_unbacked_symbols(value))
    except Exception:  # not a tensor, symbol or structure of them: nothing symbolic
        return False
