"""The flat quant-scheme adaptor (ops/fused_signature.py): every fused native, Triton launcher
and CUDA/HIP op gets its custom-op signature from the catalog, and its body a QuantScheme."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from torch import Tensor

from vllm_xdsl import ops
from vllm_xdsl.backends.cuda import torch_ops as cuda_ops
from vllm_xdsl.backends.triton.functions import FUNCTIONS
from vllm_xdsl.core import catalog
from vllm_xdsl.core.scheme import QuantScheme
from vllm_xdsl.core.variant import parse_variant
from vllm_xdsl.ops import fused as F
from vllm_xdsl.ops.fused_signature import flat_fused, layout, scheme_of
from vllm_xdsl.tune.cache import impl_hash

FP8 = torch.float8_e4m3fn


class _Seen:
    """A body that records what it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.builds = 0

    def build(self, op: str, scale: Tensor | None, scale_ub: Tensor | None,
              zero_point: Tensor | None, fields: tuple) -> QuantScheme:
        self.builds += 1
        return scheme_of(op, scale, scale_ub, *fields)


def _recording(seen: _Seen):  # noqa: ANN202
    @flat_fused("fused_add_rms_norm_quant", build=seen.build)
    def body(x: Tensor, residual: Tensor, weight: Tensor | None, epsilon: float,
             rounded_sum: bool, scheme: QuantScheme, scale: Tensor | None,
             scale_ub: Tensor | None, zero_point: Tensor | None) -> tuple[Tensor, Tensor]:
        seen.calls.append((x, residual, weight, epsilon, rounded_sum, scheme, scale, scale_ub,
                           zero_point))
        return x, x

    return body


@pytest.mark.parametrize("name", ops.FUSED)
def test_every_flat_function_has_the_native_signature(name: str) -> None:
    native = inspect.signature(getattr(F, name))
    assert native == inspect.signature(ops.ALL_OPS[name].native)
    assert inspect.signature(FUNCTIONS[name]) == native
    assert tuple(native.parameters) == catalog.SPECS[name].param_names
    namespace = cuda_ops.define("cuda", kernels=object())
    assert inspect.signature(getattr(namespace, name)) == native


def test_positional_keyword_and_default_calls_bind_alike() -> None:
    seen = _Seen()
    f = _recording(seen)
    x, r, s = torch.ones(2, 8), torch.zeros(2, 8), torch.tensor([0.5])
    f(x, r, None, 1e-6, s, None, FP8, True, "tensor")
    f(x, r, None, 1e-6, s, None, FP8, True, "tensor", 0, False, False, 1e-10, None, "", False)
    f(x=x, residual=r, weight=None, epsilon=1e-6, scale=s, scale_ub=None, quant_dtype=FP8,
      static=True, granularity="tensor")
    f(x, r, None, 1e-6, s, None, FP8, True, "tensor", rounded_sum=True, variant="div")
    assert seen.builds == 4
    want = QuantScheme(FP8, True, "tensor")
    for call in seen.calls[:3]:
        assert call[:5] == (x, r, None, 1e-6, False) and call[5] == want
        assert call[6] is s and call[7] is None and call[8] is None
    assert seen.calls[3][4] is True and seen.calls[3][5].scaling == "div"


@pytest.mark.parametrize("args, kwargs, match", [
    ((), {}, "missing"),
    ((1, 2, 3), {}, "missing"),
    ((1,) * 17, {}, "too many"),
    ((1,) * 9, {"x": 1}, "multiple values"),
    ((1,) * 9, {"bogus": 1}, "unexpected keyword"),
])
def test_bad_calls_are_pythons_type_errors(args: tuple, kwargs: dict, match: str) -> None:
    seen = _Seen()
    with pytest.raises(TypeError, match=match):
        _recording(seen)(*args, **kwargs)
    assert seen.builds == 0


def test_the_scheme_is_checked_before_the_body_runs() -> None:
    seen = _Seen()
    with pytest.raises(ValueError, match="fused_add_rms_norm_quant: a static scheme needs a scale"):
        _recording(seen)(torch.ones(1, 8), torch.ones(1, 8), None, 1e-6, None, None, FP8, True,
                         "tensor")
    assert seen.calls == []


def test_a_body_must_take_the_ops_own_parameters_then_the_scheme() -> None:
    with pytest.raises(TypeError, match="a flat_fused body takes"):
        @flat_fused("rms_norm_quant")
        def bad(x: Tensor, epsilon: float, weight: Tensor | None, scheme: QuantScheme,
                scale: Tensor | None, scale_ub: Tensor | None,
                zero_point: Tensor | None) -> tuple[Tensor, Tensor]:
            raise AssertionError
    with pytest.raises(ValueError, match="not a fused op"):
        flat_fused("rms_norm")


def test_a_new_fused_op_gets_its_signature_from_its_declaration_alone() -> None:
    spec = catalog.OpSpec(
        "scaled_act_quant", "act_and_mul",
        (catalog.Param("x", "tensor"), catalog.Param("alpha", "float"),
         *catalog.SCHEME_PARAMS, catalog.Param("beta", "int", optional=True, default=None)),
        (catalog.Result("q"), catalog.Result("scales", optional=True)), "m:f", fused=True,
        producer="silu_and_mul", quants=catalog.FUSABLE_QUANTS, activation="silu")
    assert spec.problem() is None

    @flat_fused(spec)
    def scaled_act_quant(x: Tensor, alpha: float, beta: int | None, scheme: QuantScheme,
                         scale: Tensor | None, scale_ub: Tensor | None,
                         zero_point: Tensor | None) -> tuple[Tensor, Tensor]:
        return x, torch.tensor([alpha])

    sig = inspect.signature(scaled_act_quant)
    assert tuple(sig.parameters) == spec.param_names
    assert sig.parameters["beta"].annotation == int | None
    assert sig.parameters["quant_dtype"].annotation is torch.dtype
    assert "Tensor? zero_point=None, str variant=\"\", SymInt? beta=None" in (
        torch.library.infer_schema(scaled_act_quant, mutates_args=()))
    assert scaled_act_quant(torch.ones(1), 2.0, None, None, FP8, False, "token")[1].item() == 2.0


def test_flat_args_give_back_the_scheme() -> None:
    flat = layout("fused_add_rms_norm_quant")
    x, r, zp = torch.ones(1, 8), torch.zeros(1, 8), torch.zeros(1)
    scheme = QuantScheme(FP8, False, "group", 4, True, True,
                         variant=parse_variant("min_scale scale bf16"))
    args = flat.flat_args((x, r, None, 1e-6, True), scheme, None, None, zp)
    assert len(args) == len(catalog.FUSED_ADD_RMS_NORM_QUANT.params)
    seen = _Seen()
    _recording(seen)(*args)
    assert seen.calls[0][5] == scheme and seen.calls[0][4] is True and seen.calls[0][8] is zp


def test_the_tuning_cache_hashes_each_backends_own_source() -> None:
    # flat_fused's wrapper lives in ops/; the hash must follow the body into its backend.
    where = {
        "native": F.rms_norm_quant,
        "triton": FUNCTIONS["rms_norm_quant"],
        "cuda": cuda_ops.define("cuda", kernels=object()).rms_norm_quant,
    }
    files = {k: Path(inspect.getsourcefile(inspect.unwrap(f)) or "") for k, f in where.items()}
    assert files["native"].name == "fused.py" and files["native"].parent.name == "ops"
    assert files["triton"].parent.name == "triton" and files["cuda"].parent.name == "cuda"
    assert len({impl_hash(f) for f in where.values()}) == 3


def test_the_inplace_launcher_passes_the_whole_scheme_on() -> None:
    # launchers().fused_add_rms_norm_quant_inplace re-flattens its scheme (flat_args) for
    # the in-place op, whose fake is the native: every field must arrive.
    from torch._subclasses.fake_tensor import FakeTensorMode

    fns = cuda_ops.launchers("cuda")
    flat = (None, None, FP8, False, "group", 16, True, False, 1e-10, None, "scale bf16", True)
    with FakeTensorMode() as mode:
        x, r = (mode.from_tensor(torch.randn(4, 64, dtype=torch.bfloat16)) for _ in range(2))
        q, residual, scales = fns.fused_add_rms_norm_quant_inplace(x, r, None, 1e-6, *flat)
        want = F.fused_add_rms_norm_quant(x, r, None, 1e-6, *flat)
    assert residual is r and q.dtype == FP8
    assert (scales.shape, scales.stride(), scales.dtype) == (
        want[2].shape, want[2].stride(), want[2].dtype)
    assert scales.dtype == torch.bfloat16 and scales.stride() == (1, 4)  # column-major, bf16
