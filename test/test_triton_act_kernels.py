"""The Triton act-and-mul kernels (silu, gelu erf, gelu tanh) against their natives, on
one operand (gate and up halves) and two (gate and a separate, strided up), unfused and
with every fused quant scheme. In Triton's interpreter without a GPU."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

from test_triton_kernels import DEVICE, DTYPES, SCHEME_IDS, SCHEMES, _scale_args, check, randn  # noqa: E402

from vllm_xdsl import ops  # noqa: E402
from vllm_xdsl.backends.triton import functions as F  # noqa: E402
from vllm_xdsl.backends.triton.spec import KernelSpec  # noqa: E402

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
    args = (*_scale_args(scheme, ub), *scheme)
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
