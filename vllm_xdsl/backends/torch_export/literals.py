"""Argument templates of `torch.call` back to Python values, through the one converter
(dialects/torch_literals.py), with the exporter's error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.ir import Attribute

from vllm_xdsl.dialects.torch_literals import LiteralError, to_python


class ExportError(Exception):
    """The IR holds something that has no torch counterpart."""


def python_value(attr: Attribute, operand: Callable[[int], Any]) -> Any:
    """The Python value of an argument attribute; `operand(i)` gives SSA operand i's node."""
    try:
        return to_python(attr, operand)
    except LiteralError as e:
        raise ExportError(str(e)) from None
