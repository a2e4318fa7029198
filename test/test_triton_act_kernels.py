"""The Triton act-and-mul kernels (silu, gelu erf, gelu tanh) against their natives, on
one operand (gate and up halves) and two (gate and a separate, strided up), unfused and
with every fused quant scheme; and gelu_and_mul_sparse's kernel. In Triton's interpreter
without a GPU."""

import pytest
import torch
from helpers.triton_cases import (  # before the kernels: it sets up the interpreter
    DEVICE,
    DTYPES,
    SCHEME_IDS,
    SCHEMES,
    check,
    randn,
    scale_args,
)

from vllm_xdsl import ops
from vllm_xdsl.backends.triton import functions as F
from vllm_xdsl.backends.triton.spec import KernelSpec

ACT_OPS = ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")


@pytest.mark.parametrize("op", ACT_OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,d", [(1, 16), (7, 64), (17, 48), (3, 4096)])
def test_act_and_mul(op, dtype, tokens, d):
    kernel, native = getattr(F, op), ops.ALL_OPS[op].native
    x = randn(tokens, 2 * d, dtype=dtype, seed=31, scale=3.0)
    check(kernel(x), native(x), ("value",))
    # Gate and up as two tensors of rank 3; up's rows strided (a slice of a wider tensor).
    gate = randn(2, tokens, d, dtype=dtype, seed=32, scale=3.0)
    up = randn(2, tokens, d + 8, dtype=dtype, seed=33, scale=3.0)[..., :d]
    check(kernel(gate, up), native(gate, up), ("value",))


@pytest.mark.parametrize("op", ACT_OPS)
@pytest.mark.parametrize("scheme,ub", SCHEMES, ids=SCHEME_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_act_and_mul_quant(op, scheme, ub, dtype):
    kernel, native = getattr(F, f"{op}_quant"), ops.ALL_OPS[f"{op}_quant"].native
    x = randn(7, 128, dtype=dtype, seed=34, scale=3.0)
    args = (*scale_args(scheme, ub), *scheme)
    check(kernel(x, *args), native(x, *args), ("value", "scales"))
    gate, up = x[:, :64].contiguous(), randn(7, 64, dtype=dtype, seed=35, scale=3.0)
    check(kernel(gate, *args, up=up), native(gate, *args, up=up), ("value", "scales"))


def test_gelu_tanh_has_no_overflow_nan():
    """tanh GELU as a / (1 + exp(-2u)): exp overflows to inf for very negative a, giving -0
    (torch gives -0 too), never inf - inf or inf / inf."""
    x = torch.tensor([[-60.0, -30.0, -12.0, 0.0, 12.0, 60.0]], device=DEVICE)
    up = torch.ones_like(x)
    got, want = F.gelu_tanh_and_mul(x, up), ops.gelu_tanh_and_mul.native(x, up)
    assert not got.isnan().any()
    check(got, want, ("value",))


def test_errors_name_the_op():
    x = randn(3, 63, dtype=torch.float16, seed=36)
    with pytest.raises(ValueError, match="^gelu_and_mul: last dimension 63 is not even$"):
        F.gelu_and_mul(x)
    with pytest.raises(ValueError, match="^gelu_tanh_and_mul: up .* must have the shape"):
        F.gelu_tanh_and_mul(x, x[:, :32])


def test_spec_up_only_for_act_ops():
    with pytest.raises(ValueError, match="up operand belongs to the act-and-mul ops"):
        KernelSpec("rms_norm", torch.float16, has_up=True)
    assert KernelSpec("gelu_and_mul", torch.float16, has_up=True).name.endswith("_up_b1024_nw4")


# --- gelu_and_mul_sparse --------------------------------------------------------------

STD_95 = 1.6448536269514722  # vLLM's std_multiplier for activation_sparsity 0.95


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,d", [(1, 16), (7, 64), (17, 48), (3, 2048)])
def test_gelu_and_mul_sparse(approximate, dtype, tokens, d):
    native = ops.gelu_and_mul_sparse.native
    x = randn(tokens, 2 * d, dtype=dtype, seed=37, scale=3.0)
    got, want = F.gelu_and_mul_sparse(x, STD_95, approximate), native(x, STD_95, approximate)
    check(got, want, ("value",))
    if dtype != torch.float32:
        # f16/bf16: the rounding points are torch's, so the interpreter gets every value
        # (the cutoff in particular: a moved cutoff would zero other gate values).
        assert torch.equal(got, want)
    gate = randn(2, tokens, d, dtype=dtype, seed=38, scale=3.0)
    up = randn(2, tokens, d + 8, dtype=dtype, seed=39, scale=3.0)[..., :d]
    check(F.gelu_and_mul_sparse(gate, 0.5, approximate, up), native(gate, 0.5, approximate, up),
          ("value",))


def test_gelu_and_mul_sparse_edge_rows():
    """A constant row (std 0: every gate value is the cutoff, so all outputs 0), a row with a
    NaN (NaN statistics: the whole output row NaN, as the native), and no rows at all."""
    x = torch.ones(3, 32, dtype=torch.bfloat16, device=DEVICE)
    x[1, 3] = float("nan")
    x[2, :16] = torch.linspace(-2, 2, 16)
    got, want = F.gelu_and_mul_sparse(x, 1.0), ops.gelu_and_mul_sparse.native(x, 1.0)
    assert torch.equal(got[0], want[0]) and not got[0].any()
    assert got[1].isnan().all() and want[1].isnan().all()
    assert torch.equal(got[2], want[2])
    empty = torch.empty(0, 32, dtype=torch.float16, device=DEVICE)
    assert F.gelu_and_mul_sparse(empty, 1.0).shape == (0, 16)


def test_gelu_and_mul_sparse_errors_name_the_op():
    x = randn(3, 64, dtype=torch.float16, seed=40)
    with pytest.raises(ValueError, match="^gelu_and_mul_sparse: approximate must be"):
        F.gelu_and_mul_sparse(x, 1.0, "erf")
    with pytest.raises(ValueError, match="^gelu_and_mul_sparse: last dimension 63 is not even$"):
        F.gelu_and_mul_sparse(x[:, :63], 1.0)
    with pytest.raises(ValueError, match="approximate belongs to gelu_and_mul_sparse"):
        KernelSpec("gelu_and_mul_sparse", torch.float16)
    with pytest.raises(ValueError, match="approximate belongs to gelu_and_mul_sparse"):
        KernelSpec("gelu_and_mul", torch.float16, approximate="tanh")


@pytest.mark.parametrize("approximate", [None, "tanh"])
def test_gelu_and_mul_sparse_lowers_to_its_kernel(approximate):
    """lower-dispatch picks the kernel; its spec reads `approximate` off the op (absent:
    "none"), and the lowered function computes the native."""
    from helpers.evaluate import evaluate
    from xdsl.dialects import func
    from xdsl.parser import Parser

    from vllm_xdsl.backends.triton.from_ir import spec_of_op
    from vllm_xdsl.dialects import make_context
    from vllm_xdsl.transforms.lowering.lower_dispatch import lower_dispatch

    attr = "" if approximate is None else f', approximate = "{approximate}"'
    t_in, t_out = "tensor<?x128xbf16>", "tensor<?x64xbf16>"
    module = Parser(make_context(), (
        f"func.func @f(%x: {t_in}) -> ({t_out}) {{\n"
        f"  %y = vllm.gelu_and_mul_sparse %x {{std_multiplier = {STD_95!r} : f64{attr}}}"
        f" : {t_in} -> {t_out}\n  func.return %y : {t_out}\n}}")).parse_module()
    report = lower_dispatch(module, "cpu", "gelu_and_mul_sparse=triton")
    module.verify()
    assert [e.decision.provider for e in report] == ["triton"]
    (op,) = [op for op in module.walk() if op.name == "triton.gelu_and_mul_sparse"]
    assert spec_of_op(op).approximate == (approximate or "none")
    x = randn(9, 128, dtype=torch.bfloat16, seed=41, scale=3.0)
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    (got,) = evaluate(fn, x)
    assert torch.equal(got, ops.gelu_and_mul_sparse.native(x, STD_95, approximate or "none"))
