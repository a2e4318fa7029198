"""The cpu provider's kernels side by side with vLLM's CPU `_C` kernels and Inductor.

    PYTHONPATH=$PWD /work/main/.venv-vllm/bin/python bench/cpu_kernels.py

For each op of the catalog that the cpu provider implements (the fused ones with each
quant scheme below), bf16, hidden 2048 and 4096, T in 1 ... 4096, one thread and all
threads, it times in one run, interleaved:

- ours: `torch.ops.vllm_xdsl_cpu.<op>` (what a compiled graph calls; the in-place fused add
  where the provider registers it in place, as vLLM's kernel is);
- vLLM: `torch.ops._C.<op>` for the same computation, where vLLM's CPU build has one (an
  output buffer allocated per call, as vLLM's wrappers do); absent without vLLM;
- Inductor: the op's native (the contract) under `torch.compile`, tokens dynamic, compiled
  once per op, hidden size and thread count (Inductor fixes the thread count at compile).

It prints µs per call and the speedups vLLM / ours and Inductor / ours, and for a fused op
at T >= 64 the speedup over the unfused sequence of the fastest single kernels (the
producer op and the quant op, each the fastest of ours, vLLM and Inductor). The targets
checked at the end: every op >= 1.0x vLLM and >= 1.0x Inductor; every fused op >= 1.3x the
unfused sequence at T >= 64. A fused op that misses the last one is shown with the most a fusion
could give there: the unfused sequence over its producer's fastest kernel (the quant free).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from vllm_xdsl import ops
from vllm_xdsl.core.catalog import SPECS

BF16 = torch.bfloat16
INT8, FP8 = torch.int8, torch.float8_e4m3fn
EPS = 1e-6
GROUP_SIZE = 128
# vLLM's CPU int8 quants multiply by the scale's reciprocal (docs/OPS.md): every int8 quant,
# fused or not, is timed as that variant, the function vLLM's kernels compute.
INT8_VARIANT = {"variant": "recip"}
# The quant schemes the fused ops are measured with: (unfused quant op, fused scheme).
SCHEMES: dict[str, tuple[str, dict[str, Any]]] = {
    "i8-static": ("static_scaled_int8_quant",
                  {"quant_dtype": INT8, "static": True, "granularity": "tensor",
                   **INT8_VARIANT}),
    "i8-token": ("dynamic_per_token_scaled_int8_quant",
                 {"quant_dtype": INT8, "static": False, "granularity": "token",
                  **INT8_VARIANT}),
    "fp8-static": ("static_scaled_fp8_quant",
                   {"quant_dtype": FP8, "static": True, "granularity": "tensor"}),
    "fp8-token": ("dynamic_per_token_scaled_fp8_quant",
                  {"quant_dtype": FP8, "static": False, "granularity": "token"}),
    "fp8-group": ("per_token_group_fp8_quant",
                  {"quant_dtype": FP8, "static": False, "granularity": "group",
                   "group_size": GROUP_SIZE}),
}
TOKENS = (1, 16, 64, 128, 1024, 4096)
HIDDEN = (2048, 4096)


@dataclass
class Inputs:
    x: torch.Tensor       # [T, H] (act-and-mul: [T, 2H])
    r: torch.Tensor       # residual [T, H]
    w: torch.Tensor       # weight [H]
    scale: torch.Tensor   # static scale [1]


def make_inputs(tokens: int, hidden: int, act: bool) -> Inputs:
    g = torch.Generator().manual_seed(tokens * 7 + hidden)
    width = 2 * hidden if act else hidden
    return Inputs(torch.randn(tokens, width, generator=g).to(BF16),
                  torch.randn(tokens, hidden, generator=g).to(BF16),
                  (1 + 0.1 * torch.randn(hidden, generator=g)).to(BF16),
                  torch.tensor([0.05], dtype=torch.float32))


@dataclass(frozen=True)
class Case:
    """One computation: an op with its scheme (fused), and how to call it."""

    name: str             # op, or op[scheme]
    op: str
    scheme: str | None
    parts: tuple[str, ...]  # the unfused sequence (fused cases): names of single cases

    @property
    def is_act(self) -> bool:
        return SPECS[self.op].activation is not None

    def args(self, i: Inputs) -> tuple[tuple[Any, ...], dict[str, Any]]:
        spec = SPECS[self.op]
        if self.scheme is not None:
            quant, scheme = SCHEMES[self.scheme]
            scale = i.scale if scheme["static"] else None
            if spec.activation is not None:
                return (i.x, scale, None), scheme
            lead = (i.x, i.w, EPS) if self.op == "rms_norm_quant" else (i.x, i.r, i.w, EPS)
            return (*lead, scale, None), scheme
        if spec.activation is not None:
            return (i.x,), {}
        if self.op == "rms_norm":
            return (i.x, i.w, EPS), {}
        if self.op == "fused_add_rms_norm":
            return (i.x, i.r, i.w, EPS), {}
        form = spec.form  # every unfused quant, with a fused scheme or not
        assert form is not None, f"{self.op}: not a quant"
        kw = INT8_VARIANT if form.dtype == "int8" else {}
        if form.static:
            return (i.x, i.scale), kw
        if form.granularity == "group":
            return (i.x, GROUP_SIZE), kw
        return (i.x,), kw


def cases(selected: set[str] | None) -> list[Case]:
    """The single ops the cpu provider implements, then its fused ops with each scheme:
    derived from the catalog (producer and activation of each fused op)."""
    provided = {name for name, op in ops.ALL_OPS.items() if "cpu" in op.impls()}
    out = [Case(name, name, None, ()) for name, spec in SPECS.items()
           if name in provided and not spec.fused]
    for name, spec in SPECS.items():
        if name not in provided or not spec.fused:
            continue
        producer = spec.producer or name.removesuffix("_quant")
        for sname, (quant, _) in SCHEMES.items():
            out.append(Case(f"{name}[{sname}]", name, sname, (producer, quant)))
    if selected:
        out = [c for c in out if c.op in selected or c.name in selected]
    return out


# --- the three implementations ----------------------------------------------------------


def ours(case: Case) -> Callable[..., Any]:
    return ops.ALL_OPS[case.op].impls()["cpu"].fn


def vllm_kernel(case: Case) -> Callable[..., Any] | None:
    """vLLM's `_C` kernel of the same computation, or None where its CPU build has none."""
    C = getattr(torch.ops, "_C", None)
    if C is None or not hasattr(C, "rms_norm") or case.scheme is not None:
        return None
    if case.op == "rms_norm":
        def rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
            out = torch.empty_like(x)
            C.rms_norm(out, x, w, eps)
            return out
        return rms
    if case.op == "fused_add_rms_norm":
        def add_rms(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, eps: float) -> Any:
            C.fused_add_rms_norm(x, r, w, eps)
            return x, r
        return add_rms
    if case.op == "static_scaled_int8_quant":
        def static_i8(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
            q = torch.empty(x.shape, dtype=INT8)
            C.static_scaled_int8_quant(q, x, scale, None)
            return q
        return static_i8
    if case.op == "dynamic_per_token_scaled_int8_quant":
        def token_i8(x: torch.Tensor) -> Any:
            q = torch.empty(x.shape, dtype=INT8)
            s = torch.empty(x.shape[0], 1, dtype=torch.float32)
            C.dynamic_scaled_int8_quant(q, x, s, None)
            return q, s
        return token_i8
    if case.is_act and hasattr(C, case.op):
        kernel = getattr(C, case.op)

        def act(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty(x.shape[0], x.shape[1] // 2, dtype=x.dtype)
            kernel(out, x)
            return out
        return act
    return None


def load_vllm() -> str:
    try:  # optional: the bench runs without it (imported by name: no type information)
        importlib.import_module("vllm.platforms").current_platform.import_kernels()
        return "vLLM " + importlib.import_module("vllm").__version__
    except Exception as e:  # no vLLM here: the column stays empty
        return f"no vLLM ({type(e).__name__})"


def composed(case: Case) -> Callable[..., Any]:
    """A fused op's native as the composition it means (producer, then the quant), in the
    fused op's argument order: Dynamo cannot trace the flat-signature adapter of the fused
    natives, and the composition is their definition."""
    producer, quant = (ops.ALL_OPS[p].native for p in case.parts)
    assert case.scheme is not None
    scheme = SCHEMES[case.scheme][1]

    def fn(*a: Any) -> Any:
        rest: tuple[Any, ...] = ()
        if case.is_act:
            y, scale = producer(a[0]), a[1]
        elif case.op == "rms_norm_quant":
            y, scale = producer(a[0], a[1], a[2]), a[3]
        else:
            (y, r), scale = producer(a[0], a[1], a[2], a[3]), a[4]
            rest = (r,)
        qargs = ((y, scale) if scheme["static"] else
                 (y, scheme["group_size"]) if scheme["granularity"] == "group" else (y,))
        variant = {"variant": scheme["variant"]} if "variant" in scheme else {}
        return quant(*qargs, **variant), *rest

    return fn


def inductor(case: Case, sample: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[..., Any]:
    native = composed(case) if case.scheme else functools.partial(
        ops.ALL_OPS[case.op].native, **kwargs)
    compiled = torch.compile(native, fullgraph=True)
    torch._dynamo.mark_dynamic(sample[0], 0)
    if len(sample) > 1 and isinstance(sample[1], torch.Tensor) and sample[1].shape == \
            sample[0].shape:
        torch._dynamo.mark_dynamic(sample[1], 0)
    compiled(*sample)
    return compiled


# --- timing -----------------------------------------------------------------------------


def _once(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn(*args, **kwargs)
    return (time.perf_counter() - start) / n


def time_side_by_side(fns: dict[str, tuple[Callable[..., Any], dict[str, Any]]],
                      args: tuple[Any, ...], repeats: int, budget_s: float) -> dict[str, float]:
    """µs per call of each, interleaved: the minimum over `repeats` rounds of a batch of
    calls sized to `budget_s` (the machine is shared: the fastest batch is the one least
    disturbed by other processes)."""
    batch: dict[str, int] = {}
    for name, (fn, kw) in fns.items():
        for _ in range(2):
            fn(*args, **kw)
        t = _once(fn, args, kw, 3)
        batch[name] = max(1, min(2000, int(budget_s / max(t, 1e-7))))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, (fn, kw) in fns.items():
            samples[name].append(_once(fn, args, kw, batch[name]))
    return {name: min(s) * 1e6 for name, s in samples.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/cpu_kernels.py", description=__doc__.split("\n")[0])
    p.add_argument("--ops", default="", help="comma-separated ops or op[scheme] (default: all)")
    p.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    p.add_argument("--hidden", default=",".join(map(str, HIDDEN)))
    p.add_argument("--threads", default=f"1,{torch.get_num_threads()}")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget-ms", type=float, default=2.0, help="time per batch of calls")
    p.add_argument("--no-inductor", action="store_true")
    ns = p.parse_args(argv)
    try:
        tokens = [int(t) for t in ns.tokens.split(",")]
        hidden = [int(h) for h in ns.hidden.split(",")]
        threads = sorted({int(t) for t in ns.threads.split(",")})
    except ValueError as e:
        print(f"error: bad number list: {e}", file=sys.stderr)
        return 2
    impl = ops.rms_norm.impls().get("cpu")
    why = "provider cpu not registered" if impl is None else impl.unavailable("cpu")
    if why is not None:
        print(f"error: the cpu provider cannot run here: {why}", file=sys.stderr)
        return 1
    vllm = load_vllm()
    # One compiled native per op, scheme, hidden size and thread count: more than Dynamo's
    # default number of entries per function (the fused natives serve several schemes).
    torch._dynamo.config.recompile_limit = 1024
    torch._dynamo.config.accumulated_recompile_limit = 1 << 16
    selected = {s.strip() for s in ns.ops.split(",") if s.strip()} or None
    todo = cases(selected)
    if not todo:
        print(f"error: no op matches --ops {ns.ops!r}", file=sys.stderr)
        return 2
    load = os.getloadavg()
    print(f"bf16; {vllm}; torch {torch.__version__}; {os.cpu_count()} cores; "
          f"load average {load[0]:.1f} / {load[1]:.1f} at start")
    print("µs per call (min of interleaved batches); x = their time / ours")
    header = (f"{'thr':>3} {'H':>5} {'T':>5}  {'op':<42} {'ours':>9} {'vLLM':>9} {'Inductor':>9}"
              f" {'x vLLM':>7} {'x Ind':>7} {'x unfused':>9}")
    misses: list[str] = []
    for nthreads in threads:
        torch.set_num_threads(nthreads)
        torch._dynamo.reset()  # Inductor's code fixes its thread count when compiled
        print(f"\n--- {nthreads} thread(s) ---\n{header}")
        for H in hidden:
            compiled: dict[str, Callable[..., Any]] = {}
            best: dict[tuple[str, int], float] = {}
            for T in tokens:
                for case in todo:
                    inputs = make_inputs(T, H, case.is_act)
                    args, kw = case.args(inputs)
                    fns: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {
                        "ours": (ours(case), kw)}
                    vk = vllm_kernel(case)
                    if vk is not None:
                        fns["vllm"] = (vk, {})
                    if not ns.no_inductor:
                        if case.name not in compiled:
                            compiled[case.name] = inductor(case, args, kw)
                        fns["inductor"] = (compiled[case.name], {})  # (scheme bound)
                    # The in-place kernels overwrite their inputs: each gets its own copy.
                    t = time_side_by_side(fns, args, ns.repeats, ns.budget_ms * 1e-3)
                    best[(case.name, T)] = min(t.values())
                    row = (f"{nthreads:>3} {H:>5} {T:>5}  {case.name:<42} {t['ours']:>9.2f} "
                           f"{t.get('vllm', float('nan')):>9.2f} "
                           f"{t.get('inductor', float('nan')):>9.2f} ")
                    xv = t["vllm"] / t["ours"] if "vllm" in t else None
                    xi = t["inductor"] / t["ours"] if "inductor" in t else None
                    row += f"{xv:>7.2f} " if xv is not None else f"{'-':>7} "
                    row += f"{xi:>7.2f} " if xi is not None else f"{'-':>7} "
                    xu = None
                    if case.parts and all((part, T) in best for part in case.parts):
                        xu = sum(best[(part, T)] for part in case.parts) / t["ours"]
                        row += f"{xu:>9.2f}"
                    else:
                        row += f"{'-':>9}"
                    print(row, flush=True)
                    where = f"{case.name} thr={nthreads} H={H} T={T}"
                    if xv is not None and xv < 1.0:
                        misses.append(f"{where}: {xv:.2f}x vLLM")
                    if xi is not None and xi < 1.0:
                        misses.append(f"{where}: {xi:.2f}x Inductor")
                    if xu is not None and T >= 64 and xu < 1.3:
                        # A fusion saves at most the quant's call: the producer's fastest
                        # kernel bounds what any fused kernel can give.
                        unfused = sum(best[(part, T)] for part in case.parts)
                        bound = unfused / best[(case.parts[0], T)]
                        misses.append(f"{where}: {xu:.2f}x the unfused sequence (< 1.3;"
                                      f" at most {bound:.2f}x with the quant free)")
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} / {load[1]:.1f} at end")
    print(f"targets missed: {len(misses)}")
    for m in misses:
        print(f"  {m}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
