"""Priority policy and `select`: syntax, precedence, forced impls, unknown providers, reports."""

from __future__ import annotations

import pytest
import torch

from vllm_xdsl import ops
from vllm_xdsl.ops import DispatchError, TensorMeta
from vllm_xdsl.ops.policy import Choice, parse_priority, resolve

BF16 = torch.bfloat16
X = TensorMeta(BF16, (None, 4096), "cuda")
W = TensorMeta(BF16, (4096,), "cuda")
ARGS = {"x": X, "weight": W, "epsilon": 1e-6}


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    monkeypatch.delenv("VLLM_XDSL_PRIORITY", raising=False)
    added: list[tuple[ops.SemanticOp, str]] = []

    def register(op, provider, **kw):
        fn = {"rms_norm": lambda x, weight, epsilon, variance_size=None: x,
              "silu_and_mul": lambda x, up=None: x}[op.name]
        op.register_impl(provider, **kw)(fn)
        added.append((op, provider))

    yield register
    for op, provider in added:
        op.unregister_impl(provider)
    ops.set_priority(None)


def providers(choices):
    return [str(c) for c in choices]


def test_parse_syntax():
    p = parse_priority("rms_norm=triton,native; silu_and_mul=cuda!")
    assert providers(p.for_op("rms_norm")) == ["triton", "native"]
    assert p.for_op("silu_and_mul") == (Choice("cuda", forced=True),)
    assert p.for_op("static_scaled_fp8_quant") is None
    bare = parse_priority("triton,native")
    assert providers(bare.for_op("silu_and_mul")) == ["triton", "native"]
    mixed = parse_priority("cuda;rms_norm=triton")
    assert providers(mixed.for_op("rms_norm")) == ["triton"]
    assert providers(mixed.for_op("silu_and_mul")) == ["cuda"]
    assert providers(parse_priority("rms_norm=auto").for_op("rms_norm")) == ["auto"]


@pytest.mark.parametrize("text,match", [
    ("rms_nrom=triton", "unknown op 'rms_nrom'"),
    ("rms_norm=triton,,native", "'' is not a provider name"),
    ("rms_norm=tri ton", "'tri ton' is not a provider name"),
    ("rms_norm=triton;rms_norm=cuda", "op 'rms_norm' listed twice"),
    ("triton;cuda", "more than one list for every op"),
    ("rms_norm=cuda,cuda!", "provider 'cuda' listed twice"),
])
def test_parse_errors(text, match):
    with pytest.raises(DispatchError, match=match):
        parse_priority(text)


def test_platform_defaults_and_native_closes():
    assert providers(resolve("rms_norm", None, "cuda")[0]) == ["cuda", "triton", "native"]
    assert providers(resolve("rms_norm", None, "rocm")[0]) == ["rocm", "triton", "native"]
    assert providers(resolve("rms_norm", None, "cpu")[0]) == ["native"]
    assert providers(resolve("rms_norm", "triton", "cpu")[0]) == ["triton", "native"]
    with pytest.raises(DispatchError, match="unknown dispatch target 'tpu'"):
        resolve("rms_norm", None, "tpu")


def test_precedence(monkeypatch):
    assert resolve("rms_norm", None, "cuda")[1] == "default for cuda"
    monkeypatch.setenv("VLLM_XDSL_PRIORITY", "rms_norm=rocm")
    assert resolve("rms_norm", None, "cuda") == ((Choice("rocm"), Choice("native")),
                                                 "VLLM_XDSL_PRIORITY")
    # An env entry for another op leaves this op on the platform default.
    assert resolve("silu_and_mul", None, "cuda")[1] == "default for cuda"
    ops.set_priority("triton")
    assert resolve("rms_norm", None, "cuda")[0][0] == Choice("triton")
    assert resolve("rms_norm", None, "cuda")[1] == "set_priority"
    assert resolve("rms_norm", "rms_norm=cuda", "cuda")[1] == "explicit"
    assert resolve("rms_norm", "rms_norm=cuda", "cuda")[0][0] == Choice("cuda")
    # The explicit string covers only rms_norm: silu_and_mul falls to set_priority.
    assert resolve("silu_and_mul", "rms_norm=cuda", "cuda")[1] == "set_priority"
    with ops.priority("rms_norm=native"):
        assert resolve("rms_norm", None, "cuda")[0] == (Choice("native"),)
    assert resolve("rms_norm", None, "cuda")[1] == "set_priority"
    ops.set_priority(None)
    assert resolve("rms_norm", None, "cuda")[1] == "VLLM_XDSL_PRIORITY"


def test_select_skips_and_records(clean):
    clean(ops.rms_norm, "t_off", supported="no GPU")
    clean(ops.rms_norm, "t_args", supports_args=lambda x, **_: x.shape[-1] <= 1024 or "H > 1024")
    clean(ops.rms_norm, "t_ok")
    clean(ops.silu_and_mul, "t_other")
    d = ops.select("rms_norm", ARGS, "t_off,t_args,t_other,t_ok", target="cuda")
    assert (d.op, d.provider) == ("rms_norm", "t_ok")
    assert d.impl is ops.rms_norm.impls()["t_ok"]
    assert d.rejected == [("t_off", "no GPU"), ("t_args", "H > 1024"),
                          ("t_other", "no t_other implementation of rms_norm")]
    # Same priority, other arguments: t_args accepts.
    small = {"x": TensorMeta(BF16, (None, 64), "cuda"), "weight": None, "epsilon": 1e-6}
    assert ops.select("rms_norm", small, "t_off,t_args,t_ok").provider == "t_args"


def test_select_says_whether_it_read_the_arguments(clean):
    # uses_args False lets eager dispatch cache a decision per device alone: it must be
    # False only when no supports_args was asked, whichever way the choice went.
    clean(ops.rms_norm, "t_off", supported="no GPU")
    clean(ops.rms_norm, "t_args", supports_args=lambda x, **_: x.shape[-1] <= 1024 or "big")
    clean(ops.rms_norm, "t_ok")
    cases = {
        "native": ("native", False),
        "t_ok": ("t_ok", False),
        "t_off,t_ok": ("t_ok", False),  # rejected for the target, not for the arguments
        "t_nosuch_impl_here,t_ok": None,  # unknown provider: an error, not a decision
        "t_args,t_ok": ("t_ok", True),  # rejected by its argument check
        "t_ok,t_args": ("t_ok", False),  # decided before the check would be asked
        "t_off,t_args": ("native", True),
    }
    for text, want in cases.items():
        if want is None:
            with pytest.raises(DispatchError, match="unknown provider"):
                ops.select("rms_norm", ARGS, text, target="cuda")
            continue
        d = ops.select("rms_norm", ARGS, text, target="cuda")
        assert (d.provider, d.uses_args) == want, text
    small = {**ARGS, "x": TensorMeta(BF16, (None, 64), "cuda")}
    d = ops.select("rms_norm", small, "t_args,t_ok", target="cuda")
    assert (d.provider, d.uses_args) == ("t_args", True)  # accepted by its check


def test_select_platform_default_order():
    d = ops.select(ops.rms_norm, {**ARGS, "x": TensorMeta(BF16, (3, 64), "cpu")}, target="cpu")
    assert (d.provider, d.rejected) == ("native", [])
    # On cuda the candidates are tried in order cuda, triton, native (whatever is registered).
    d = ops.select(ops.rms_norm, ARGS, target="cuda")
    order = ["cuda", "triton", "native"]
    tried = [p for p, _ in d.rejected] + [d.provider]
    assert tried == order[: len(tried)] and d.provider in order


def test_unknown_provider():
    with pytest.raises(DispatchError) as e:
        ops.select("rms_norm", ARGS, "rms_norm=tirton,native")
    assert "rms_norm" in str(e.value) and "'tirton'" in str(e.value)
    # Built-in provider names are known even where nothing registered them yet.
    for name in ("rocm", "cuda", "triton"):
        d = ops.select("silu_and_mul", {"x": X}, name)
        assert d.provider in (name, "native")
        assert d.provider == name or d.rejected[0][0] == name


def test_forced(clean):
    clean(ops.rms_norm, "t_off", supported=lambda: "driver too old")
    clean(ops.rms_norm, "t_rej", supports_args=lambda **_: "f8 only")
    with pytest.raises(DispatchError) as e:
        ops.select("rms_norm", ARGS, "rms_norm=t_off!")
    msg = str(e.value)
    assert "rms_norm:t_off" in msg and "forced" in msg and "driver too old" in msg
    with pytest.raises(DispatchError, match="rms_norm:t_rej is forced.*f8 only"):
        ops.select("rms_norm", ARGS, "t_rej!,native")
    # Forcing a provider that has no impl of this op is an error as well.
    with pytest.raises(DispatchError, match="silu_and_mul:t_off is forced.*no t_off implementation"):
        ops.select("silu_and_mul", {"x": X}, "t_off!")
    # Not forced: skipped.
    assert ops.select("rms_norm", ARGS, "t_off,t_rej").provider == "native"


def test_auto_needs_token_count():
    # auto measures per token bucket (vllm_xdsl/tune): without a count, only the lowering's
    # runtime selection can use it.
    with pytest.raises(DispatchError, match="'auto' needs the token count"):
        ops.select("rms_norm", ARGS, "rms_norm=auto")


def test_select_positional_and_bad_op():
    assert ops.select("rms_norm", (X, None, 1e-6), target="cpu").provider == "native"
    with pytest.raises(DispatchError, match="unknown op 'nope'"):
        ops.select("nope", {})


def test_report(clean):
    clean(ops.rms_norm, "t_off", supported=False)
    report = ops.DispatchReport()
    report.add("%3", ops.select("rms_norm", ARGS, "t_off,native"))
    report.add("%5", ops.select("silu_and_mul", {"x": X}, "native"))
    assert len(report) == 2 and [e.node for e in report] == ["%3", "%5"]
    assert report.format().splitlines() == [
        "dispatch report: 2 node(s)",
        "%3: rms_norm -> native",
        "    rejected t_off: not supported here",
        "%5: silu_and_mul -> native",
    ]
