"""The cpu provider's torch operator kernels (backends/cpu/op_csrc/vx_cpu_ops.cpp).

They are built here over the emulated kernel library (the same extern "C" launchers; any
host with g++), as the ops of a test namespace defined from the same Python functions as
`vllm_xdsl_cpu`, so that they run on hosts that cannot run the kernels too. What is
checked: the C++ kernel is what runs on the common cases (the Python kernels are made to
fail), with the bits the Python kernel gives, and on a quant variant from the call after the
one that parsed its text; every other case reaches the Python kernel,
whose checks and messages stay the only ones; the unfused quants equal the native in every
bit. Where this CPU runs the cpu provider, the provider's own ops are checked the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from helpers.cuda_emulated import build_kernels, require_cxx

from vllm_xdsl import ops
from vllm_xdsl.backends.cpu import op_library
from vllm_xdsl.backends.cpu.host import host_problem, isa_key
from vllm_xdsl.backends.cuda import build as B
from vllm_xdsl.backends.cuda.build import ToolchainMissing
from vllm_xdsl.backends.cuda.kernels import Kernels
from vllm_xdsl.backends.cuda.torch_ops import define
from vllm_xdsl.core.catalog import quant_specs

NS = "vllm_xdsl_cpu_optest"
BF16, FP8, I8 = torch.bfloat16, torch.float8_e4m3fn, torch.int8
G = torch.Generator().manual_seed(0)
X = torch.randn(3, 256, generator=G).to(BF16)
R = torch.randn(3, 256, generator=G).to(BF16)
W = torch.randn(256, generator=G).to(BF16)
S = torch.tensor([0.05])
# The cases the C++ kernels take (contiguous rows, default numerics): op, args.
FAST: list[tuple[str, tuple[Any, ...]]] = [
    ("rms_norm", (X, W, 1e-6)),
    ("rms_norm", (X, W.float(), 1e-6, 100)),  # Gemma-style float32 weight, variance_size
    ("rms_norm", (X.float(), None, 1e-5)),
    ("fused_add_rms_norm", (X, R, W, 1e-6, True)),
    ("fused_add_rms_norm", (X.half(), R.half(), None, 1e-6)),
    ("silu_and_mul", (X,)),
    ("gelu_and_mul", (X,)),
    ("gelu_tanh_and_mul", (X, R)),
    ("static_scaled_fp8_quant", (X, S)),
    ("static_scaled_fp8_quant", (X, S.to(BF16), torch.float8_e4m3fnuz)),
    ("static_scaled_int8_quant", (X, S)),
    ("dynamic_per_token_scaled_fp8_quant", (X, torch.tensor([2.0]))),
    ("dynamic_per_token_scaled_int8_quant", (X,)),
    ("per_token_group_fp8_quant", (X, 64)),
    ("per_token_group_fp8_quant", (X, 128, True, True, 1e-8)),
    ("dynamic_scaled_fp8_quant", (X,)),
    ("rms_norm_quant", (X, W, 1e-6, S, None, I8, True, "tensor")),
    ("rms_norm_quant", (X, W, 1e-6, None, None, FP8, False, "group", 64)),
    ("fused_add_rms_norm_quant", (X, R, W, 1e-6, None, torch.tensor([1.5]), FP8, False,
                                  "token")),
    ("fused_add_rms_norm_quant", (X, R, W, 1e-6, None, None, I8, False, "token", 0, False,
                                  False, 1e-10, None, "", True)),
    ("silu_and_mul_quant", (X, S, None, FP8, True, "tensor")),
    ("gelu_and_mul_quant", (X, None, None, FP8, False, "group", 64, True)),
]
# Cases the C++ kernels hand to the Python kernel.
ZP = torch.tensor([3], dtype=I8)
SLOW: list[tuple[str, tuple[Any, ...]]] = [
    ("rms_norm", (X[:, :128], W[:128], 1e-6)),  # rows not contiguous
    ("fused_add_rms_norm", (X, R.t().contiguous().t(), W, 1e-6)),  # residual column-major
    ("silu_and_mul", (X[:, :128],)),
    ("static_scaled_int8_quant", (X, S, ZP)),
    ("static_scaled_int8_quant", (X, S, ZP, "recip")),
    ("dynamic_per_token_scaled_int8_quant", (X, ZP)),
    ("dynamic_scaled_fp8_quant", (X, FP8, None, "quotient bf16")),
    # Not the canonical spelling ("recip min_scale"; "range 200.0", as the scheme drops
    # the default scaling): parsed in Python on every call.
    ("dynamic_per_token_scaled_fp8_quant", (X, None, FP8, None, "min_scale  recip")),
    ("dynamic_per_token_scaled_fp8_quant", (X, None, FP8, None, "div range 200.0")),
]
# Variants: the Python kernel parses the first call's text, the C++ kernel takes the next.
VARIANTS: list[tuple[str, tuple[Any, ...]]] = [
    ("static_scaled_int8_quant", (X, S, None, "recip")),
    ("static_scaled_fp8_quant", (X, S, FP8, None, "quotient bf16")),
    ("dynamic_per_token_scaled_int8_quant", (X, None, "recip scale bf16")),
    ("dynamic_per_token_scaled_fp8_quant", (X, torch.tensor([2.0]), FP8, None, "range 200.0")),
    ("per_token_group_fp8_quant", (X, 64, True, False, 1e-8, FP8, None, "recip scale f16")),
    ("rms_norm_quant", (X, W, 1e-6, S, None, FP8, True, "tensor", 0, False, False, 1e-10,
                        None, "quotient bf16")),
    ("fused_add_rms_norm_quant", (X, R, W, 1e-6, None, None, I8, False, "token", 0, False,
                                  False, 1e-10, None, "recip zero_eps 1e-05")),
    ("silu_and_mul_quant", (X, None, None, FP8, False, "group", 64, True, False, 1e-10, None,
                            "scale bf16")),
]
# What the Python kernels say (the C++ kernels check nothing of their own).
ERRORS: list[tuple[str, tuple[Any, ...], str]] = [
    ("rms_norm", (X, W, 1e-6, 0), "rms_norm: variance_size 0 not in"),
    ("silu_and_mul", (X[:, :5].contiguous(),), "silu_and_mul: last dimension 5 is not even"),
    ("per_token_group_fp8_quant", (X, 100), "group_size 100 does not divide hidden size 256"),
    ("rms_norm_quant", (X, W, 1e-6, None, None, FP8, False, "tensor"),
     "dynamic per-tensor quantization cannot be fused"),
    ("fused_add_rms_norm", (X, R.float(), W, 1e-6), "residual .* does not match x"),
    ("static_scaled_fp8_quant", (X, S, I8), "fp8_dtype torch.int8 is not an fp8 dtype"),
]
PYTHON_KERNELS = ("rms_norm", "fused_add_rms_norm", "act_and_mul", "quant",
                  "dynamic_scaled_fp8_quant", "fused")


class PythonKernelRan(Exception):
    pass


def no_python_kernels(mp: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise PythonKernelRan

    for name in PYTHON_KERNELS:
        mp.setattr(Kernels, name, fail)


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, SimpleNamespace]:
    """(the test namespace's torch ops with the C++ kernels loaded, the Python kernels)."""
    emul = build_kernels("warp32", tmp_path_factory).emulation
    assert emul is not None
    kernels = Kernels("cpu", emulation=emul)
    define("cpu", kernels, NS)
    op_library.load_op_library(emul.path, NS)
    return getattr(torch.ops, NS), define("cpu", kernels)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(u, v) for u, v in zip(a, b, strict=True))
    if a.dtype != b.dtype or a.shape != b.shape or a.stride() != b.stride():
        return False
    if a.element_size() == 1:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))


def clone(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def test_the_cpu_dispatch_key_has_the_cpp_kernels(emulated: tuple[Any, SimpleNamespace]) -> None:
    for name in {n for n, _ in FAST} | {"fused_add_rms_norm_", "fused_add_rms_norm_quant_"}:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"{NS}::{name}", "CPU"), name


def test_every_quant_form_of_the_cpp_kernels_is_a_catalog_form() -> None:
    # The C++ quant kernels are registered from the catalog (op_library.CPP_FORMS): a form
    # listed there that no op has would be a kernel nobody can reach.
    assert set(op_library.CPP_FORMS) <= {s.form for s in quant_specs()}


@pytest.mark.parametrize(("op", "args"), FAST, ids=[f"{op}-{i}" for i, (op, _) in enumerate(FAST)])
def test_fast_cases_run_in_cpp_with_the_python_kernels_bits(
        emulated: tuple[Any, SimpleNamespace], op: str, args: tuple[Any, ...],
        monkeypatch: pytest.MonkeyPatch) -> None:
    torch_ops, python = emulated
    expected = getattr(python, op)(*args)
    no_python_kernels(monkeypatch)
    assert same(getattr(torch_ops, op)(*args), expected)


def test_in_place_fast_cases_write_their_inputs(emulated: tuple[Any, SimpleNamespace],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    torch_ops, python = emulated
    out, residual_out = python.fused_add_rms_norm(X, R, W, 1e-6)
    q, _, scales = python.fused_add_rms_norm_quant(X, R, W, 1e-6, None, None, I8, False, "token")
    no_python_kernels(monkeypatch)
    x, r = X.clone(), R.clone()
    assert torch_ops.fused_add_rms_norm_(x, r, W, 1e-6) is None
    assert same((x, r), (out, residual_out))
    r = R.clone()
    got = torch_ops.fused_add_rms_norm_quant_(X, r, W, 1e-6, None, None, I8, False, "token")
    assert same(tuple(got), (q, scales)) and same(r, residual_out)


@pytest.mark.parametrize(("op", "args"), SLOW, ids=[f"{op}-{i}" for i, (op, _) in enumerate(SLOW)])
def test_other_cases_reach_the_python_kernel(emulated: tuple[Any, SimpleNamespace], op: str,
                                             args: tuple[Any, ...],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    torch_ops, python = emulated
    expected = getattr(python, op)(*clone(args))
    assert same(getattr(torch_ops, op)(*clone(args)), expected)
    no_python_kernels(monkeypatch)
    with pytest.raises(PythonKernelRan):
        getattr(torch_ops, op)(*args)


@pytest.mark.parametrize(("op", "args"), VARIANTS,
                         ids=[f"{op}-{i}" for i, (op, _) in enumerate(VARIANTS)])
def test_a_variant_runs_in_cpp_once_the_python_kernel_parsed_it(
        emulated: tuple[Any, SimpleNamespace], op: str, args: tuple[Any, ...],
        monkeypatch: pytest.MonkeyPatch) -> None:
    torch_ops, python = emulated
    expected = getattr(python, op)(*args)
    assert same(getattr(torch_ops, op)(*args), expected)  # the first call may parse it
    no_python_kernels(monkeypatch)
    assert same(getattr(torch_ops, op)(*args), expected)


def test_a_variant_is_known_for_the_scheme_it_was_parsed_for(
        emulated: tuple[Any, SimpleNamespace], monkeypatch: pytest.MonkeyPatch) -> None:
    """The struct depends on the scheme (here the fp8 maximum): the same text under an fp8
    flavour not seen yet is the Python kernel's again."""
    torch_ops, _ = emulated
    torch_ops.static_scaled_fp8_quant(X, S, FP8, None, "quotient f16")
    no_python_kernels(monkeypatch)
    torch_ops.static_scaled_fp8_quant(X, S, FP8, None, "quotient f16")
    with pytest.raises(PythonKernelRan):
        torch_ops.static_scaled_fp8_quant(X, S, torch.float8_e4m3fnuz, None, "quotient f16")


@pytest.mark.parametrize(("op", "args", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_refused_arguments_get_the_python_kernels_message(
        emulated: tuple[Any, SimpleNamespace], op: str, args: tuple[Any, ...],
        message: str) -> None:
    torch_ops, _ = emulated
    with pytest.raises(ValueError, match=message):
        getattr(torch_ops, op)(*args)


def special_values(n: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-12, 12, (n,), generator=g).float())
    ties = (torch.arange(-200, 200).float() + 0.5) * 0.25  # k + 1/2 after / 0.25
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, 6e4])
    return torch.cat([special, ties, x])[:n].to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_unfused_quants_equal_the_native_in_every_bit(emulated: tuple[Any, SimpleNamespace],
                                                      dtype: torch.dtype,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    torch_ops, _ = emulated
    x = special_values(1024, dtype).reshape(8, 128)
    finite = x.nan_to_num(0.0, 0.0, 0.0)
    s = torch.tensor([0.25])
    no_python_kernels(monkeypatch)
    cases: list[tuple[str, tuple[Any, ...]]] = [
        ("static_scaled_fp8_quant", (x, s)), ("static_scaled_int8_quant", (x, s)),
        ("dynamic_per_token_scaled_int8_quant", (finite,)),
        ("dynamic_per_token_scaled_fp8_quant", (finite,)),
        ("per_token_group_fp8_quant", (finite, 32)),
    ]
    for op, args in cases:
        assert same(getattr(torch_ops, op)(*args), ops.ALL_OPS[op].native(*args)), op


def test_missing_torch_headers_are_a_one_line_reason(tmp_path: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(op_library, "TORCH_DIR", tmp_path)
    problem = op_library.torch_headers_problem()
    assert problem is not None and "torch's C++ headers are missing" in problem
    assert "\n" not in problem
    with pytest.raises(ToolchainMissing, match="headers are missing"):
        op_library.build_op_library(tmp_path / "vx_cpu.so")


@pytest.fixture
def compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The compiler commands of builds into a fresh cache (tmp_path), none run: each
    writes an empty file where the compiler would write its output."""
    require_cxx()
    monkeypatch.setenv("VLLM_XDSL_CACHE_DIR", str(tmp_path))
    commands: list[list[str]] = []

    def record(cmd: list[str], vendor: str, log: Path) -> None:
        commands.append(cmd)
        Path(cmd[cmd.index("-o") + 1]).write_bytes(b"")

    monkeypatch.setattr(B, "_run_compiler", record)
    return commands


def test_the_prebuild_builds_what_a_first_call_loads(
        compiles: list[list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m vllm_xdsl.backends.cuda.build cpu` fills the cache with what a first cpu
    op call needs (op_library.build_host): the kernel library for this host's instruction
    sets and its operator library; that call then compiles nothing. cpu takes no archs."""
    assert B.main(["cpu"]) == 0
    printed = capsys.readouterr().out
    assert len(compiles) == 3  # the kernel library, the operator kernels' object, their link
    compiles.clear()
    kernels, operators = op_library.build_host()
    assert compiles == []
    assert printed.split()[:2] == [str(kernels), str(operators)]
    assert kernels.name.startswith(f"vx_cpu_{isa_key()}_")
    with pytest.raises(SystemExit) as exit_:
        B.main(["cpu", "native"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "cpu takes no archs: its kernels are built for this host's CPU (-march=native)")


def test_the_operator_kernels_compile_once_without_the_kernel_library(
        compiles: list[list[str]], tmp_path: Path) -> None:
    """The operator kernels compile to an object that reads nothing of the kernel library,
    so that a first call builds it beside that library (op_library.build_host); the object
    is cached, and another kernel library only links it again."""
    built = [op_library.build_op_library(tmp_path / name) for name in ("vx_a.so", "vx_b.so")]
    objects = [c for c in compiles if "-c" in c]
    links = [c for c in compiles if "-c" not in c]
    assert len(objects) == 1 and len(links) == 2 and built[0] != built[1]
    assert not any("vx_a" in arg or "vx_b" in arg for arg in objects[0])
    assert [any(f"-l:{name}" == arg for arg in link) for link, name in
            zip(links, ("vx_a.so", "vx_b.so"), strict=True)] == [True, True]


@pytest.mark.skipif(host_problem() is not None, reason=str(host_problem()))
def test_the_cpu_providers_ops_run_in_cpp(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu: Callable[..., Any] = ops.ALL_OPS["rms_norm"].impls()["cpu"].fn
    expected = cpu(X, W, 1e-6)  # the first call builds and loads the operator library
    assert torch._C._dispatch_has_kernel_for_dispatch_key("vllm_xdsl_cpu::rms_norm", "CPU")
    no_python_kernels(monkeypatch)
    assert same(cpu(X, W, 1e-6), expected)
    assert same(torch.ops.vllm_xdsl_cpu.static_scaled_int8_quant(X, S),
                ops.static_scaled_int8_quant.native(X, S))
    monkeypatch.undo()
    quant = torch.ops.vllm_xdsl_cpu.dynamic_per_token_scaled_int8_quant
    quant(X, None, "recip")  # vLLM CPU's int8 numerics, raised: parsed once, in Python
    no_python_kernels(monkeypatch)
    assert same(quant(X, None, "recip"),
                ops.dynamic_per_token_scaled_int8_quant.native(X, None, "recip"))
