"""Where an op came from in the FX graph it was imported from: its location.

The importer locates each op at its FX node, `loc("mul_3")` in MLIR's debug syntax
(a NameLoc). The location travels with the op through the passes: a clone keeps it, and an
op a pass creates has none. The exporter reads it back to copy the node's metadata (its
fake value, stack trace, provenance) to what the op becomes, and to tell the ops a pass
created (which it spells as AOTAutograd would) from those it imported.
"""

from __future__ import annotations

from xdsl.dialects.builtin import NameLoc, NoneAttr, StringAttr
from xdsl.ir import Operation

_NO_LOCATION = NoneAttr()


def fx_location(node_name: str) -> NameLoc:
    """The location of an op imported from FX node `node_name`.

    Built as ParametrizedAttribute.new does, less IRDL's verifier: the two parameters are
    valid by construction, and verifying them (~4 us) on every op made a 32-layer import
    a third slower. test_fx_location.py checks it equals the verified NameLoc."""
    loc = NameLoc.__new__(NameLoc)
    object.__setattr__(loc, "desc", StringAttr(node_name))
    object.__setattr__(loc, "location", _NO_LOCATION)
    return loc


def fx_origin(op: Operation) -> str | None:
    """The FX node name `op` was imported from, or None (an op a pass created)."""
    loc = op.location
    return loc.desc.data if isinstance(loc, NameLoc) and loc.location == _NO_LOCATION else None
