"""Node import: one FX node at a time into a block of the function being built.

`torch.ops.vllm_xdsl.*` calls become `vllm.*` ops (frontend/semantic.py); every other call
becomes an opaque `torch.call` with its overload, literal arguments and results; `getitem`
on a tuple-returning node selects one of its results. A node that cannot be represented
exactly raises FrontendError: nothing is ever dropped.
"""

from __future__ import annotations

import logging
import operator
import re
from typing import Any

import torch
import torch.fx
from xdsl.dialects import func
from xdsl.dialects.builtin import Float64Type, FloatAttr, StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.dialects.fx_location import fx_location
from vllm_xdsl.dialects.torch import CONSTANT_VALUE, CallOp, GetAttrOp
from vllm_xdsl.frontend.literals import literal
from vllm_xdsl.frontend.semantic import import_semantic, is_semantic
from vllm_xdsl.frontend.targets import target_name
from vllm_xdsl.frontend.types import FrontendError, result_types, value_type

Value = SSAValue | list[SSAValue]
logger = logging.getLogger("vllm_xdsl.frontend")
_FX_SUFFIX = re.compile(r"(_\d+)+$")


class NodeImporter:
    """Imports the nodes of one graph into `block`, keeping FX node -> IR value(s)."""

    def __init__(self, block: Block, owner: torch.nn.Module | None) -> None:
        self.block = block
        self.owner = owner
        self.values: dict[torch.fx.Node, Value] = {}

    def value(self, node: torch.fx.Node, user: torch.fx.Node) -> SSAValue:
        v = self.values.get(node)
        if v is None:
            raise FrontendError(f"node {user.name} uses {node.name} before it is defined")
        if isinstance(v, list):
            raise FrontendError(
                f"node {user.name} uses the tuple result of {node.name} other than by getitem"
            )
        return v

    def add(self, op: Operation, node: torch.fx.Node) -> None:
        """Append `op`, located at the FX node it came from (fx_origin reads it back)."""
        op.location = fx_location(node.name)
        self.block.add_op(op)

    # --- one method per node kind --------------------------------------------------------

    def placeholder(self, node: torch.fx.Node) -> None:
        t = value_type(node.meta.get("val"), f"placeholder {node.name}")
        arg = self.block.insert_arg(t, len(self.block.args))
        _name(arg, node.name)
        self.values[node] = arg

    def get_attr(self, node: torch.fx.Node) -> None:
        val = node.meta.get("val")
        if val is None and self.owner is not None:
            val = _fetch_attr(self.owner, str(node.target))
        op = GetAttrOp.create(
            properties={"attr_name": StringAttr(str(node.target))},
            result_types=[value_type(val, f"get_attr {node.name}")],
        )
        scalar = _fetch_attr(self.owner, str(node.target)) if self.owner is not None else None
        if isinstance(scalar, torch.Tensor) and scalar.dim() == 0 and scalar.is_floating_point():
            # A 0-d constant (a lifted `torch.tensor(448.0)` clamp bound, an eps): its value,
            # so that raise-native can read it (raising/match.constant_value). The import may
            # run under the compile's fake mode; the constant itself is a real tensor.
            from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

            if not isinstance(scalar, FakeTensor) and scalar.device.type != "meta":
                with unset_fake_temporarily():
                    value = float(scalar.item())
                op.attributes[CONSTANT_VALUE] = FloatAttr(value, Float64Type())
        _name(op.results[0], node.name)
        self.add(op, node)
        self.values[node] = op.results[0]

    def call_function(self, node: torch.fx.Node) -> None:
        source = node.args[0] if node.args else None
        results = self.values.get(source) if isinstance(source, torch.fx.Node) else None
        if node.target is operator.getitem and isinstance(results, list):
            index = node.args[1]
            if not isinstance(index, int) or not -len(results) <= index < len(results):
                raise FrontendError(f"getitem {node.name}: bad index {index!r}")
            self.values[node] = results[index]
            return
        if is_semantic(node.target):
            try:
                new_ops, values = import_semantic(node, lambda n: self.value(n, node))
            except (FrontendError, VerifyException) as e:
                # Arguments the vllm op cannot express: keep the exact torch call instead.
                logger.debug("node %s stays an opaque call: %s", node.name, e)
            else:
                for op in new_ops:
                    self.add(op, node)
                self.values[node] = values
                return
        self._opaque(node)

    def output(self, node: torch.fx.Node) -> list[SSAValue]:
        outs = node.args[0]
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        values = []
        for i, out in enumerate(outs):
            if not isinstance(out, torch.fx.Node):
                raise FrontendError(f"output {i} is the literal {out!r}, not a node")
            values.append(self.value(out, node))
        self.block.add_op(func.ReturnOp(*values))
        return values

    # --- opaque calls ---------------------------------------------------------------------

    def _opaque(self, node: torch.fx.Node) -> None:
        where = f"node {node.name} ({node.target})"
        operands: list[SSAValue] = []
        index: dict[torch.fx.Node, int] = {}

        def operand(n: torch.fx.Node) -> int:
            if n not in index:
                index[n] = len(operands)
                operands.append(self.value(n, node))
            return index[n]

        args = [literal(a, operand, where) for a in node.args]
        kwargs: dict[str, Attribute] = {k: literal(v, operand, where) for k, v in node.kwargs.items()}
        if "val" not in node.meta:
            raise FrontendError(f"{where} has no meta['val'] (not a traced graph?)")
        types, is_tuple = result_types(node.meta["val"], where)
        op = CallOp(target_name(node.target), operands, args, types, kwargs)
        self.add(op, node)
        if is_tuple:
            self.values[node] = list(op.results)
            for r in op.results:
                _name(r, node.name)
        else:
            _name(op.results[0], node.name)
            self.values[node] = op.results[0]


def _fetch_attr(owner: torch.nn.Module, target: str) -> Any:
    obj: Any = owner
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _name(value: SSAValue, name: str) -> None:
    # Name hints only make dumps readable. FX's `_N` suffixes are dropped: the printer adds
    # its own, and a kept one could collide with them (two values printed as %split_1).
    name = _FX_SUFFIX.sub("", name)
    if name and SSAValue.is_valid_name(name):
        value.name_hint = name
