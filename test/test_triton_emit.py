"""Kernel specs and emitted sources: validation, readability, one template per family."""

import pytest
import torch

from vllm_xdsl.backends.triton.emit import emit_kernels, emit_source
from vllm_xdsl.backends.triton.spec import ALL_OPS, QUANT_OPS, KernelSpec
from vllm_xdsl.core.scheme import QuantScheme

BF16 = torch.bfloat16
E4M3 = torch.float8_e4m3fn
GROUP = QuantScheme(E4M3, False, "group", 64, True, True)


def all_specs() -> list[KernelSpec]:
    token = QuantScheme(E4M3, False, "token")
    specs = [
        KernelSpec("rms_norm", BF16, BF16, 1e-6, 32),
        KernelSpec("fused_add_rms_norm", torch.float16),
        KernelSpec("silu_and_mul", torch.float32),
        KernelSpec("rms_norm_quant", BF16, torch.float32, None, None, GROUP, block_size=128),
        KernelSpec("fused_add_rms_norm_quant", BF16, None, 1e-5, None, token, True),
        KernelSpec("silu_and_mul_quant", BF16, scheme=QuantScheme(torch.int8, True, "tensor")),
        KernelSpec("gelu_and_mul", BF16, has_up=True),
        KernelSpec("gelu_tanh_and_mul", torch.float16),
        KernelSpec("gelu_and_mul_quant", torch.float32, scheme=GROUP, block_size=128),
        KernelSpec("gelu_tanh_and_mul_quant", BF16, scheme=QuantScheme(E4M3, False, "token"),
                   has_up=True),
        KernelSpec("fatrelu_and_mul", BF16, has_up=True),
        KernelSpec("gelu_and_mul_sparse", BF16, approximate="tanh"),
        KernelSpec("gelu_and_mul_sparse", torch.float32, has_up=True, approximate="none"),
    ]
    for op, (dtypes, static, gran) in QUANT_OPS.items():
        scheme = QuantScheme(dtypes[-1], static, gran, *((64,) if gran == "group" else ()))
        specs.append(KernelSpec(op, torch.float16, scheme=scheme, block_size=64))
    return specs


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.name)
def test_every_spec_emits_valid_python(spec):
    src = emit_source(spec)
    compile(src, spec.name, "exec")  # syntactically valid
    assert src.startswith(f"# Triton kernel {spec.name}\n")
    assert f"#   op = {spec.op}" in src
    for name in emit_kernels(spec):
        assert f"def {name}(" in src
    # Helpers are emitted only when called.
    for helper in ("_round_bf16", "_e4m3_encode", "_div_rn_by", "_rint", "_pow2_ceil"):
        assert (f"def {helper}(" in src) == (f" {helper}(" in src.replace(f"def {helper}(", ""))


def test_every_op_has_a_template():
    assert {s.op for s in all_specs()} == set(ALL_OPS)


def code(spec: KernelSpec) -> str:
    """The source without its header comment."""
    return "\n".join(ln for ln in emit_source(spec).splitlines() if not ln.startswith("#"))


def test_source_keeps_only_what_the_spec_needs():
    plain = code(KernelSpec("rms_norm", torch.float32))
    assert "weight" not in plain and "residual" not in plain and "_round" not in plain
    assert "epsilon," in plain  # runtime epsilon argument
    baked = code(KernelSpec("rms_norm", torch.float32, epsilon=3e-07))
    assert "epsilon," not in baked and "var + 3e-07" in baked
    vs = code(KernelSpec("rms_norm", BF16, variance_size=48))
    assert "tl.where(cols < 48, x * x, 0.0)" in vs and "48.0" in vs
    mixed = code(KernelSpec("rms_norm", BF16, torch.float32))
    # f32 weight: the product is not rounded to the weight dtype, only to bf16 at the end.
    assert "    y = y * w\n    y = _round_bf16(y)\n" in mixed


def test_specs_are_hashable_cache_keys():
    a = KernelSpec("rms_norm_quant", BF16, BF16, None, None, GROUP, block_size=4096, num_warps=8)
    b = KernelSpec("rms_norm_quant", BF16, BF16, None, None, GROUP, block_size=4096, num_warps=8)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != KernelSpec(
        "rms_norm_quant", BF16, BF16, 1e-6, None, GROUP, block_size=4096, num_warps=8
    )


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(op="layer_norm", dtype=BF16), "no Triton template"),
        (dict(op="rms_norm", dtype=torch.int8), "activation dtype"),
        (dict(op="rms_norm", dtype=BF16, block_size=96), "power of two"),
        (dict(op="silu_and_mul", dtype=BF16, epsilon=1e-6), "belong to the norm"),
        (dict(op="fused_add_rms_norm", dtype=BF16, variance_size=8), "variance_size"),
        (dict(op="rms_norm_quant", dtype=BF16), "scheme is required"),
        (dict(op="rms_norm", dtype=BF16, scheme=GROUP), "scheme is required"),
        (dict(op="static_scaled_fp8_quant", dtype=BF16, scheme=GROUP), "is not the scheme"),
        (
            dict(op="rms_norm_quant", dtype=BF16, scheme=QuantScheme(E4M3, False, "tensor")),
            "unfused only",
        ),
        (dict(op="rms_norm_quant", dtype=BF16, scheme=GROUP, block_size=32), "group_size"),
        (
            dict(
                op="rms_norm_quant",
                dtype=BF16,
                scheme=QuantScheme(E4M3, True, "tensor"),
                has_scale_ub=True,
            ),
            "scale_ub",
        ),
    ],
)
def test_invalid_specs_are_rejected_with_a_reason(kwargs, match):
    with pytest.raises(ValueError, match=match):
        KernelSpec(**kwargs)


def test_without_triton_registration_works_and_says_why(monkeypatch):
    import sys

    from vllm_xdsl.backends.triton import compile as C
    from vllm_xdsl.backends.triton import register as R

    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` now fails
    assert "triton is not importable" in R.available("cuda")
    spec = KernelSpec("silu_and_mul", torch.float16, block_size=8)
    assert "def silu_and_mul_kernel(" in emit_source(spec)  # emission needs no Triton
    C.get_module.cache_clear()
    C.get_kernels.cache_clear()
    with pytest.raises(C.TritonUnavailableError, match="not importable"):
        C.get_kernel(spec)


def test_hw_casts_leave_bf16_and_e4m3fn_rounding_to_the_gpu():
    static = QuantScheme(E4M3, True, "tensor")
    emulated = KernelSpec("rms_norm_quant", BF16, BF16, None, None, static, block_size=128)
    hw = KernelSpec("rms_norm_quant", BF16, BF16, None, None, static, block_size=128,
                    hw_casts=True)
    assert hw.name == emulated.name + "_hw" and hw != emulated
    src, hw_src = emit_source(emulated), emit_source(hw)
    assert "_round_bf16(" in src and "_e4m3_encode(" in src
    for helper in ("_round_bf16", "_e4m3_encode"):
        assert helper not in hw_src
    assert ".to(tl.bfloat16).to(tl.float32)" in hw_src
    assert "q.to(tl.float8e4nv).to(tl.uint8, bitcast=True)" in hw_src
    assert "#   hw_casts = True" in hw_src
    # e4m3fnuz (ROCm) keeps the f32 rounding and encoding even with hw_casts.
    fnuz = KernelSpec("static_scaled_fp8_quant", BF16, block_size=128, hw_casts=True,
                      scheme=QuantScheme(torch.float8_e4m3fnuz, True, "tensor"))
    assert "_e4m3_encode(" in emit_source(fnuz)
