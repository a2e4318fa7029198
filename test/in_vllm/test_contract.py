"""Our contract against vLLM IR's (vllm.ir.ops): for each vLLM IR op, our native equals
vLLM's native bit for bit over vLLM's own input generators (`generate_inputs`, plus the
argument values the generators leave at their defaults: no weight, a variance size), and
our tolerances equal `vllm/ir/tolerances.py` (with the op's overrides) but where a
difference is named here. Needs vLLM (the vLLM test environment)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("vllm")

import torch  # noqa: E402
from vllm import ir  # noqa: E402
from vllm.ir.op import IrOp  # noqa: E402
from vllm.ir.tolerances import DEFAULT_TOLERANCES  # noqa: E402

from vllm_xdsl import ops  # noqa: E402
from vllm_xdsl.ops.grid import output_kinds  # noqa: E402
from vllm_xdsl.ops.tolerance import tolerance  # noqa: E402

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
TOKENS = (1, 17, 128)
HIDDEN = (64, 1000, 4096)

# vLLM IR ops that may have no counterpart here yet, and why (a new vLLM op fails the test
# below until it is compared or named here; a named one, once declared, is compared).
NOT_HERE: dict[str, str] = {}
# Arguments vLLM's op takes and ours does not (the cases that set them are not compared).
NO_COUNTERPART = {
    "fused_add_rms_norm": {"variance_size": "our fused_add_rms_norm has no variance_size"},
}
# Output dtypes whose tolerance differs, and how (ours: ops/tolerance.py, docs/OPS.md).
TOLERANCE_DIFFERENCES = {
    torch.float64: "none here: no op of ours takes f64 activations",
    torch.float8_e4m3fn: "ours: within one fp8 step, >= 99 % exactly equal (vLLM: atol=rtol=0.1)",
    torch.float8_e5m2: "none here: our fp8 ops produce e4m3fn / e4m3fnuz only",
    torch.float4_e2m1fn_x2: "none here: no fp4 op",
}


def _vllm_ops() -> dict[str, IrOp]:
    return {name: getattr(ir.ops, name) for name in ir.ops.__all__}


def _ours(name: str) -> ops.SemanticOp | None:
    return ops.ALL_OPS.get(name)


def test_every_vllm_ir_op_is_compared_or_named() -> None:
    names = set(_vllm_ops())
    assert names == set(IrOp.registry), "ir.ops.__all__ and the registry disagree"
    compared = {n for n in names if _ours(n) is not None}
    assert compared | set(NOT_HERE) == names
    assert {"rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"} <= compared


def _cases(name: str) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """(label, args) from vLLM's generator, then with the defaults it leaves unset."""
    op = _vllm_ops()[name]
    norm = name in ("rms_norm", "fused_add_rms_norm")
    # The generators' own knobs: epsilon for the norms, the GELU form for the sparse one.
    knobs = [{}, {"epsilon": 1e-6}] if norm else [{}, {"approximate": "none"}]
    for dtype, t, h, knob in itertools.product(DTYPES, TOKENS, HIDDEN, knobs):
        torch.manual_seed(t * 10007 + h)
        args = op.generate_inputs(num_tokens=t, hidden_size=h, dtype=dtype, **knob)
        label = f"{name} {dtype} T={t} H={h} {knob}"
        yield label, args
        if norm:
            w = 1 if name == "rms_norm" else 2
            yield label + " weight=None", (*args[:w], None, *args[w + 1:])
            yield label + " weight=f32", (*args[:w], args[w].float(), *args[w + 1:])
        if name == "rms_norm" and h > 64:
            yield label + " variance_size=64", (*args, 64)


def _clone(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _tuple(v: Any) -> tuple[torch.Tensor, ...]:
    return v if isinstance(v, tuple) else (v,)


@pytest.mark.parametrize("name", ["rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"])
def test_our_native_is_vllms_native_bit_for_bit(name: str) -> None:
    ours = _ours(name)
    if ours is None:
        assert name in NOT_HERE, f"vLLM IR's {name} has no op here and is not named"
        pytest.skip(f"{name}: {NOT_HERE[name]}")
    theirs: Callable[..., Any] = _vllm_ops()[name].impls["native"].impl_fn
    compared = 0
    for label, args in _cases(name):
        want = _tuple(theirs(*_clone(args)))
        got = _tuple(ours.native(*_clone(args)))
        assert len(got) == len(want), label
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.dtype == w.dtype and g.shape == w.shape, (label, i)
            assert torch.equal(g, w), (label, i, (g.double() - w.double()).abs().max().item())
        compared += 1
    assert compared >= len(DTYPES) * len(TOKENS) * len(HIDDEN) * 2


def test_arguments_without_counterpart_are_named() -> None:
    """Each vLLM argument missing from our op is named in NO_COUNTERPART, and no other."""
    for name, op in _vllm_ops().items():
        ours = _ours(name)
        if ours is None:
            continue
        theirs = list(op._py_signature.parameters)
        mine = list(ours.signature.parameters)
        # Positional correspondence: the leading parameters line up (x_residual ~ residual).
        missing = theirs[len(mine):] + [t for t, m in zip(theirs, mine, strict=False)
                                        if t != m and t.removeprefix("x_") != m]
        assert set(missing) == set(NO_COUNTERPART.get(name, {})), (name, theirs, mine)


@pytest.mark.parametrize("name", ["rms_norm", "fused_add_rms_norm", "gelu_and_mul_sparse"])
def test_tolerances_match_vllms(name: str) -> None:
    op = _vllm_ops()[name]
    ours = _ours(name)
    assert ours is not None
    kinds = output_kinds(name, len(ours.outputs))
    differing = set()
    for dtype in DEFAULT_TOLERANCES:
        want = op.get_tolerance(dtype)
        try:
            mine = tolerance(dtype, kinds[0])
        except ValueError:
            mine = None
        if mine is None or mine != (want["atol"], want["rtol"]):
            differing.add(dtype)
    assert differing == set(TOLERANCE_DIFFERENCES), {str(d) for d in differing}
