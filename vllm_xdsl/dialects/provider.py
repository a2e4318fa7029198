"""Provider dialects: one op per kernel, with the semantic op's operands plus the
implementation's own properties.

A provider op has exactly the operands, results, syntax and verifier of its `vllm`
op (the same `*Signature` class), so a provider op still says what it computes; the extra
properties say how (block size, vector width, in place). `triton.py`, `cuda.py` and
`rocm.py` each declare their dialect with `define_provider_dialect`.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import I64, IntegerAttr, UnitAttr
from xdsl.ir import Dialect, Operation
from xdsl.irdl import IRDLOperation, opt_prop_def
from xdsl.utils.exceptions import VerifyException

from vllm_xdsl.core.catalog import SPECS
from vllm_xdsl.dialects.vllm import SIGNATURES, SemanticSignature, define_op

# Semantic ops with an in-place kernel: which result overwrites which input (the op's
# declaration in core/catalog.py says it once).
INPLACE_OUTPUTS: dict[str, dict[str, str]] = {
    name: dict(spec.inplace) for name, spec in SPECS.items() if spec.inplace
}


def has_inplace_variant(semantic_name: str) -> bool:
    return semantic_name in INPLACE_OUTPUTS


def _power_of_two(name: str, allowed: range) -> Callable[[IRDLOperation], None]:
    def check(op: IRDLOperation) -> None:
        attr = op.properties.get(name)
        if not isinstance(attr, IntegerAttr):
            return
        value = attr.value.data
        if value not in allowed or value & (value - 1):
            raise VerifyException(
                f"{name} must be a power of two in [{allowed.start}, {allowed.stop - 1}], got {value}"
            )

    return check


IMPL_PROPERTIES: dict[str, tuple[str, Callable[[IRDLOperation], None] | None]] = {
    # name: (kind, checker)
    "block_size": ("int", _power_of_two("block_size", range(1, (1 << 16) + 1))),
    "num_warps": ("int", _power_of_two("num_warps", range(1, 33))),
    "vec_width": ("int", _power_of_two("vec_width", range(1, 17))),
    "inplace": ("unit", None),
}


def define_provider_dialect(name: str, properties: tuple[str, ...]) -> Dialect:
    """A dialect `<name>` with one op per semantic op, carrying `properties`."""
    ops: list[type[Operation]] = [_provider_op(name, sig, properties) for sig in SIGNATURES]
    return Dialect(name, ops)


def ops_by_name(dialect: Dialect) -> dict[str, type[SemanticSignature]]:
    """Semantic op name -> the dialect's op of it."""
    return {op.SEMANTIC_NAME: op for op in dialect.operations
            if issubclass(op, SemanticSignature)}


def _provider_op(
    dialect: str, signature: type[SemanticSignature], properties: tuple[str, ...]
) -> type[SemanticSignature]:
    extra: dict[str, object] = {}
    checks = []
    for prop in properties:
        kind, check = IMPL_PROPERTIES[prop]
        extra[prop] = opt_prop_def(IntegerAttr[I64] if kind == "int" else UnitAttr)
        if check is not None:
            checks.append(check)
    semantic = signature.SEMANTIC_NAME

    def verify_(self: SemanticSignature) -> None:
        signature.verify_(self)
        for check in checks:
            check(self)
        if "inplace" in self.properties and not has_inplace_variant(semantic):
            raise VerifyException(f"{dialect}.{semantic} has no in-place variant")

    extra["verify_"] = verify_
    return define_op(dialect, signature, extra)
