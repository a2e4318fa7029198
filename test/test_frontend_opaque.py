"""Opaque objects in a compiled graph: torch's opaque-object API (a reference type, and a
hoisted value type like the attention layer name vLLM passes into its graphs) reaches the
graph as a `FakeScriptObject` placeholder. The importer types it `!torch.opaque<"...">`,
calls read it as an operand, a mutating custom op that takes it stays an opaque call with
its aliasing, and the backend compiles the graph without falling back."""

from __future__ import annotations

import logging
import os

import pytest
import torch

if not torch.cuda.is_available():  # Triton kernels run in its interpreter (set before import)
    os.environ.setdefault("TRITON_INTERPRET", "1")

from torch._library.opaque_object import get_opaque_type_name, register_opaque_type  # noqa: E402
from torch._opaque_base import OpaqueBase  # noqa: E402
from xdsl.dialects.builtin import StringAttr  # noqa: E402
from xdsl.parser import Parser  # noqa: E402

from vllm_xdsl import compile as backend  # noqa: E402
from vllm_xdsl.dialects import make_context  # noqa: E402
from vllm_xdsl.dialects.torch import OpaqueType  # noqa: E402
from vllm_xdsl.frontend import capture, import_graph  # noqa: E402
from vllm_xdsl.frontend.types import opaque_class_name, value_type  # noqa: E402

HIDDEN = 32


class Scaler(OpaqueBase):
    """A reference-type opaque object: stateful, only the op that takes it reads it."""

    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.calls = 0


class Name:
    """A hoisted value-type opaque object, as vLLM's `LayerName` is."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Name) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __fx_repr__(self) -> tuple[str, dict[str, type]]:
        return f"Name({self.value!r})", {"Name": Name}


register_opaque_type(Scaler, typ="reference")
register_opaque_type(Name, typ="value", hoist=True)
SCALER, NAME = get_opaque_type_name(Scaler), get_opaque_type_name(Name)

_lib = torch.library.Library("vxopaque", "FRAGMENT")
_lib.define(f"scale(Tensor x, {SCALER} s) -> Tensor")
# Written into a caller's out buffer, as vLLM's unified_attention_with_output is.
_lib.define(f"attend_(Tensor q, {NAME} layer, Tensor(a!) out) -> ()")
WEIGHTS: dict[str, float] = {"layers.0": 0.5, "layers.1": -2.0}


def _scale(x: torch.Tensor, s: Scaler) -> torch.Tensor:
    s.calls += 1
    return x * s.factor


def _attend_(q: torch.Tensor, layer: Name, out: torch.Tensor) -> None:
    out.copy_(q.softmax(-1) * WEIGHTS[layer.value])  # the value decides what is computed


_lib.impl("scale", _scale, "CompositeExplicitAutograd")
_lib.impl("attend_", _attend_, "CompositeExplicitAutograd")
torch.library.register_fake("vxopaque::scale", lambda x, s: torch.empty_like(x), lib=_lib)
torch.library.register_fake("vxopaque::attend_", lambda q, layer, out: None, lib=_lib)


def _norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)
    return w * y.to(x.dtype)


class Layer(torch.nn.Module):
    """attention-like mutating op on an out buffer, a norm, an op taking a stateful object."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(HIDDEN).to(torch.bfloat16))

    def forward(self, x: torch.Tensor, layer: Name, scaler: Scaler) -> torch.Tensor:
        out = torch.empty_like(x)
        torch.ops.vxopaque.attend_(x, layer, out)
        return torch.ops.vxopaque.scale(_norm(out + x, self.weight), scaler)


def _inputs(tokens: int) -> torch.Tensor:
    return torch.randn(tokens, HIDDEN, generator=torch.Generator().manual_seed(tokens)
                       ).to(torch.bfloat16)


def test_opaque_values_are_typed_by_class_name() -> None:
    gm = capture(Layer(), _inputs(4), Name("layers.0"), Scaler(3.0))
    vals = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    names = [opaque_class_name(v) for v in vals if opaque_class_name(v) is not None]
    assert names == [NAME, SCALER]
    # The real objects outside of tracing are named the same.
    assert opaque_class_name(Name("x")) == NAME and opaque_class_name(Scaler(1.0)) == SCALER
    assert opaque_class_name(torch.zeros(1)) is None
    assert value_type(Name("x"), "x") == OpaqueType(StringAttr(NAME))

    text = str(import_graph(gm).module)
    assert f'!torch.opaque<"{NAME}">' in text and f'!torch.opaque<"{SCALER}">' in text
    # The mutating op stays one opaque call that names its out buffer as a base.
    assert text.count('torch.call "higher_order::auto_functionalized_v2"') == 1, text
    assert "torch.ops.vxopaque.attend_.default" in text and "_all_bases" in text
    assert '"vxopaque::scale.default"' in text
    # The printed IR parses back to the same text.
    reparsed = Parser(make_context(), text).parse_module()
    assert str(reparsed) == text


def test_opaque_type_syntax_rejects_a_missing_name() -> None:
    from xdsl.utils.exceptions import ParseError

    bad = 'func.func @f(%a: !torch.opaque<>) { func.return }'
    with pytest.raises(ParseError):
        Parser(make_context(), bad).parse_module()


@pytest.mark.parametrize("inner", ["eager", "inductor"])
def test_compiled_with_opaque_objects_no_fallback(inner: str, caplog) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Layer()
    compiled = torch.compile(model, backend="vllm_xdsl", dynamic=True,
                             options={"inner": inner, "strict": True})
    # Bit for bit what the same inner compiler makes of the graph without our passes
    # (Inductor keeps bf16 sums in f32 inside its fused kernels, eager rounds them).
    expected = model if inner == "eager" else torch.compile(model, backend=inner, dynamic=True)
    mark, fallbacks = len(backend.RESULTS), len(backend.FALLBACKS)
    scaler, reference = Scaler(1.5), Scaler(1.5)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="vllm_xdsl"):
        for tokens, layer in ((3, "layers.0"), (7, "layers.1"), (5, "layers.0")):
            x = _inputs(tokens)
            got = compiled(x, Name(layer), scaler)
            want = expected(x, Name(layer), reference)
            torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert scaler.calls == reference.calls == 3  # the real object reached the op each call
    assert len(backend.FALLBACKS) == fallbacks
    assert not [r for r in caplog.records if r.name == "vllm_xdsl"]
    results = backend.RESULTS[mark:]
    assert results, "the pipeline never ran"
    # raise-native ran on the graph with the objects: the residual add and the norm after
    # the mutating op became one semantic op.
    raised = results[0].stages[1].op_counts
    assert raised.get("vllm.fused_add_rms_norm", 0) == 1, raised


def test_fallback_is_counted(monkeypatch) -> None:
    from vllm_xdsl import frontend

    def boom(*args, **kwargs):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(frontend, "import_graph", boom)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x * 2, backend="vllm_xdsl", options={"inner": "eager"})
    before = len(backend.FALLBACKS)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), x * 2)
    new = backend.FALLBACKS[before:]
    assert [(f.stage, f.error) for f in new] == [("import", "RuntimeError: injected failure")]
