"""GPU benchmark of the generated Triton kernels (issue 6), side by side with the baselines.

For every kernel (each op, the fused ops with their common schemes) at decode and prefill
shapes (tokens 1, 16, 256, 4096, 16384; hidden 4096, 5120, 8192; bf16) it measures:

- triton:   the generated kernel (vllm_xdsl.backends.triton), as eager dispatch calls it
            (on an NVIDIA sm_89+ GPU that passes conversion_check: rounding to bf16/e4m3fn
            with the GPU's conversion instructions);
- triton_emu, triton_hw: (--impls) the same kernels with the f32 emulation of those
            roundings, or with the instructions unchecked (launch.hw_casts; sm_89+);
- cuda:     the compiled CUDA kernel (vllm_xdsl.backends.cuda, issue 7) through its torch
            op, when nvcc is installed (--impls triton skips it);
- eager:    the native contract run by PyTorch eagerly;
- inductor: the native contract compiled by torch.compile (Inductor fuses norm+quant into
            one Triton kernel of its own: the real baseline);
- copy:     device-to-device copy bandwidth (a 1 GiB tensor copy), the limit.

Time is the device time of the kernels one call launches (the call captured in a CUDA
graph, replays timed with L2 flushed), so host overhead does not hide the kernels at 4096
tokens; `--timing call` times the call as made, host included. Bandwidth counts the bytes
every implementation must move: its inputs read once plus its outputs written once. Each
implementation's result is also checked against the native contract (OPS.md tolerances)
before it is timed. Prints a Markdown table, optionally writes it
(--out) and a PNG plot (--plot; needs matplotlib).

    python bench/kernels.py                          # the whole grid (needs a GPU)
    python bench/kernels.py --ops rms_norm,rms_norm_quant[group128] --tokens 4096,16384
    python bench/kernels.py --dry-run                # CPU: Triton's interpreter, tiny shapes

Targets at >= 4096 tokens x 4096: >= 85 % of copy bandwidth; never slower than inductor.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# bench/ is on sys.path when this runs as a script
from _kernels_report import format_row, target_summary
from _kernels_timing import Timer, copy_bandwidth

TOKENS = (1, 16, 256, 4096, 16384)
HIDDEN = (4096, 5120, 8192)
DRY_TOKENS, DRY_HIDDEN = (1, 7), (256,)
COPY_BYTES = 1 << 30


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", help="comma-separated case names (default: all; --list shows them)")
    p.add_argument("--tokens", help=f"comma-separated token counts (default {TOKENS})")
    p.add_argument("--hidden", help=f"comma-separated hidden sizes (default {HIDDEN})")
    p.add_argument("--no-inductor", action="store_true", help="skip the torch.compile baseline")
    p.add_argument(
        "--impls",
        default="triton,cuda",
        help="this project's implementations to time (default triton,cuda; cuda needs nvcc; "
        "triton_emu / triton_hw: the Triton kernels with f32-emulated / hardware bf16 and fp8 "
        "conversions)",
    )
    p.add_argument(
        "--timing",
        choices=("kernel", "call"),
        default="kernel",
        help="kernel (default): the device time of a call's kernels, through a CUDA graph; "
        "call: the call as made, host cost included",
    )
    p.add_argument("--out", help="write the Markdown table to this file")
    p.add_argument(
        "--plot",
        default=None,
        help="write a PNG plot here (default bench/kernels.png on a GPU, none in a dry run)",
    )
    p.add_argument("--list", action="store_true", help="list the case names and exit")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="run every path on the CPU in Triton's interpreter with tiny shapes "
        "(checks the script, measures nothing meaningful)",
    )
    return p.parse_args(argv)


@dataclass(frozen=True)
class Case:
    """One benchmarked kernel: the op and how to build its arguments for [tokens, hidden]."""

    name: str
    op: str
    make: Callable[[Any, int, int], tuple]  # (Tensor factory, tokens, hidden) -> args


def cases() -> list[Case]:
    import torch

    e4m3 = torch.float8_e4m3fn

    def static(mk):
        return mk.scale()

    out = [
        Case("rms_norm", "rms_norm", lambda mk, t, h: (mk(t, h), mk(h), 1e-6)),
        Case(
            "fused_add_rms_norm",
            "fused_add_rms_norm",
            lambda mk, t, h: (mk(t, h), mk(t, h), mk(h), 1e-6),
        ),
        Case(
            "static_scaled_fp8_quant",
            "static_scaled_fp8_quant",
            lambda mk, t, h: (mk(t, h), static(mk)),
        ),
        Case("dynamic_scaled_fp8_quant", "dynamic_scaled_fp8_quant", lambda mk, t, h: (mk(t, h),)),
        Case(
            "dynamic_per_token_scaled_fp8_quant",
            "dynamic_per_token_scaled_fp8_quant",
            lambda mk, t, h: (mk(t, h),),
        ),
        Case(
            "per_token_group_fp8_quant",
            "per_token_group_fp8_quant",
            lambda mk, t, h: (mk(t, h), 128),
        ),
        Case(
            "static_scaled_int8_quant",
            "static_scaled_int8_quant",
            lambda mk, t, h: (mk(t, h), static(mk)),
        ),
        Case(
            "dynamic_per_token_scaled_int8_quant",
            "dynamic_per_token_scaled_int8_quant",
            lambda mk, t, h: (mk(t, h),),
        ),
        Case("silu_and_mul", "silu_and_mul", lambda mk, t, h: (mk(t, 2 * h),)),
    ]
    schemes = {
        "static": lambda mk: (mk.scale(), None, e4m3, True, "tensor"),
        "token": lambda mk: (None, None, e4m3, False, "token"),
        "group128": lambda mk: (None, None, e4m3, False, "group", 128),
    }
    for tag, scheme in schemes.items():
        out.append(
            Case(
                f"rms_norm_quant[{tag}]",
                "rms_norm_quant",
                lambda mk, t, h, s=scheme: (mk(t, h), mk(h), 1e-6, *s(mk)),
            )
        )
        out.append(
            Case(
                f"fused_add_rms_norm_quant[{tag}]",
                "fused_add_rms_norm_quant",
                lambda mk, t, h, s=scheme: (mk(t, h), mk(t, h), mk(h), 1e-6, *s(mk)),
            )
        )
    for tag in ("static", "group128"):
        out.append(
            Case(
                f"silu_and_mul_quant[{tag}]",
                "silu_and_mul_quant",
                lambda mk, t, h, s=schemes[tag]: (mk(t, 2 * h), *s(mk)),
            )
        )
    return out


class Maker:
    """bf16 random tensors on the device, and a static scale."""

    def __init__(self, device: str) -> None:
        import torch

        self.torch, self.device = torch, device
        self.gen = torch.Generator(device=device).manual_seed(0)

    def __call__(self, *shape: int):
        return self.torch.randn(*shape, generator=self.gen, device=self.device).to(
            self.torch.bfloat16
        )

    def scale(self):
        return self.torch.tensor([0.02], device=self.device)


def tensors(obj) -> list:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in tensors(o)]
    return []


def nbytes(args: tuple, outs) -> int:
    return sum(t.numel() * t.element_size() for t in tensors(args) + tensors(outs))


def check(case: Case, got, want) -> str:
    """'ok' or the first OPS.md tolerance violation of an implementation's result."""
    import torch

    from vllm_xdsl.ops.tolerance import contract_error

    got, want = tensors(got), tensors(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        scales = w.dtype == torch.float32 and "quant" in case.op and i > 0
        norm = case.op.startswith(("rms", "fused")) and "quant" not in case.op
        problem = contract_error(
            g.cpu(), w.cpu(), kind="scales" if scales else ("norm" if norm else "value")
        )
        if problem:
            return f"MISMATCH output {i}: {problem}"
    return "ok"


def mark_tokens_dynamic(args: tuple, tokens: int) -> None:
    """Compile the Inductor baseline as vLLM does: token dimension dynamic, hidden static.

    One graph then serves every token count >= 2 (a count of 1 compiles its own), instead
    of one specialised compile and one automatic-dynamic recompile per hidden size."""
    import torch

    if tokens < 2:
        return
    for t in tensors(args):
        if t.dim() == 2 and t.shape[0] == tokens:
            torch._dynamo.mark_dynamic(t, 0)


def compiled(case: Case, hidden: int, native: Callable, cache: dict) -> Callable:
    """torch.compile'd native, one per (case, hidden)."""
    import torch

    key = (case.name, hidden)
    if key not in cache:
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 256)
        cache[key] = torch.compile(native)
    return cache[key]


def implementations(names: list[str], gpu: bool) -> dict[str, Callable[[str], Callable]]:
    """name -> (op name -> function with the native signature), for the impls that can run.

    An implementation that cannot run here is reported once and left out."""
    out: dict[str, Callable[[str], Callable]] = {}
    for name in names:
        if name == "triton":
            from vllm_xdsl.backends.triton.functions import FUNCTIONS

            out[name] = FUNCTIONS.__getitem__
        elif name in ("triton_emu", "triton_hw"):  # the same kernels, one rounding form
            from vllm_xdsl.backends.triton.functions import FUNCTIONS
            from vllm_xdsl.backends.triton.launch import hw_casts

            def forced(op: str, hw: bool = name == "triton_hw") -> Callable:
                def call(*args: Any) -> Any:
                    with hw_casts(hw):
                        return FUNCTIONS[op](*args)

                return call

            out[name] = forced
        elif name == "cuda":
            from vllm_xdsl.backends.cuda.register import available

            why = available("cuda") if gpu else "dry run (CPU)"
            if why is not True:
                print(f"cuda column skipped: {why}")
                continue
            from vllm_xdsl.backends.cuda.torch_ops import launchers

            fns = launchers("cuda")
            out[name] = lambda op, fns=fns: getattr(fns, op)
        else:
            raise SystemExit(
                f"bench/kernels.py: unknown implementation {name!r} "
                "(triton, triton_emu, triton_hw, cuda)"
            )
    return out


def measure_case(
    case: Case,
    hidden: int,
    tokens: tuple[int, ...],
    fns: dict[str, Callable],
    timer: Timer,
    compile_cache: dict,
    no_inductor: bool,
    mk: Maker,
) -> list[dict[str, Any]]:
    """Rows of one case at one hidden size, every token count. All compiling and checking
    happens before any timing: on the H200 the rows timed between a case's first Inductor
    compiles were often several times slower than later ones (cause not established)."""
    from vllm_xdsl import ops

    native = ops.ALL_OPS[case.op].native
    variants = dict(fns, eager=native)
    prepared = []
    for t in sorted(tokens, reverse=True):  # largest first: the dynamic graph first
        a = case.make(mk, t, hidden)
        want = native(*a)
        row: dict[str, Any] = dict(case=case.name, tokens=t, hidden=hidden,
                                   moved=nbytes(a, want), inductor=float("nan"))
        calls = dict(variants)
        if not no_inductor:
            mark_tokens_dynamic(a, t)
            calls["inductor"] = compiled(case, hidden, native, compile_cache)
        problems = []
        for name, fn in calls.items():
            # Inductor is checked like ours: it shows the deviations any compiler makes.
            status = "ok" if name == "eager" else check(case, fn(*a), want)
            if status != "ok":
                problems.append(f"{name}: {status}")
        row["check"] = "; ".join(problems) or "ok"
        prepared.append((row, a, calls))
    for row, a, calls in prepared:
        row["how"] = {}
        for name, fn in calls.items():
            row[name], row["how"][name] = timer(lambda fn=fn, a=a: fn(*a), name)
    return [row for row, _, _ in prepared]


def run(args: argparse.Namespace) -> int:
    import torch

    gpu = not args.dry_run
    device = "cuda" if gpu else "cpu"
    all_cases = cases()
    wanted = args.ops.split(",") if args.ops else [c.name for c in all_cases]
    unknown = set(wanted) - {c.name for c in all_cases}
    if unknown:
        print(
            f"bench/kernels.py: unknown case(s) {sorted(unknown)}; --list shows them",
            file=sys.stderr,
        )
        return 2
    tokens = (
        tuple(int(t) for t in args.tokens.split(","))
        if args.tokens
        else (DRY_TOKENS if args.dry_run else TOKENS)
    )
    hidden = (
        tuple(int(h) for h in args.hidden.split(","))
        if args.hidden
        else (DRY_HIDDEN if args.dry_run else HIDDEN)
    )
    impls = implementations(args.impls.split(","), gpu)
    timer = Timer(gpu, args.timing)
    copy_size = COPY_BYTES if gpu else 1 << 24
    copy_peak = copy_bandwidth(timer, device, copy_size)
    name = torch.cuda.get_device_name() if gpu else "CPU (Triton interpreter, dry run)"
    timing = {
        "kernel": "device time of the call's kernels: the call captured in a CUDA graph, its "
        "replays timed (median of CUDA events, L2 flushed before each; triton.testing.do_bench); "
        "host cost of the call not included; '*': could not be captured, timed as a call",
        "call": "median of CUDA-event timings around the call with L2 flushed "
        "(triton.testing.do_bench), host cost of the call included",
    }[args.timing] if gpu else "wall clock of the call (dry run: Triton's interpreter)"
    if gpu and "triton" in impls:
        from vllm_xdsl.backends.triton.launch import uses_hw_casts

        hw = uses_hw_casts(torch.device(device))  # runs conversion_check on an sm_89+ GPU
        name += f"; triton rounds with {'the GPU conversions' if hw else 'the f32 emulation'}"
    header = (
        f"device: {name}; torch {torch.__version__}; "
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
        f"command: python bench/kernels.py {' '.join(sys.argv[1:])}\n"
        f"copy bandwidth ({copy_size >> 20} MiB device-to-device): {copy_peak:.4g} GB/s\n"
        f"time: {timing}; 'x ind' = Inductor time / our time (> 1: ours faster)\n"
    )
    print(header)
    cols = ["case", "tokens", "hidden", "MB moved"]
    for impl in impls:
        cols += [f"{impl} us", f"{impl} % copy", f"{impl} x ind"]
    cols += ["eager us", "inductor us", "inductor % copy", "check"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    print(lines[0], lines[1], sep="\n", flush=True)
    # Written row by row: a run cut short (a device lease ending) keeps what it measured.
    table = open(args.out, "w") if args.out else None  # noqa: SIM115 - closed below
    if table:
        table.write(header + "\n" + "\n".join(lines) + "\n")
    plot_path = (
        args.plot if args.plot is not None else (None if args.dry_run else "bench/kernels.png")
    )
    results: list[dict[str, Any]] = []
    compile_cache: dict = {}
    mk = Maker(device)
    # Hidden size outermost: a run cut short still has every case at the first hidden size.
    for h in hidden:
        for case in (c for c in all_cases if c.name in wanted):
            fns = {impl: get(case.op) for impl, get in impls.items()}
            for row in measure_case(case, h, tokens, fns, timer, compile_cache, args.no_inductor,
                                    mk):
                results.append(row)
                line = format_row(row, list(impls), copy_peak, gpu and args.timing == "kernel")
                lines.append(line)
                print(line, flush=True)
                if table:
                    table.write(line + "\n")
                    table.flush()
        if plot_path:  # redrawn after each hidden size, for the same reason
            from _kernels_plot import plot  # bench/ is on sys.path when run as a script

            plot(results, list(impls), copy_peak, plot_path, name)
    summary = [f"graph capture failed for {k}, timed as a call: {v}"
               for k, v in timer.capture_failures.items()]
    summary += target_summary(results, list(impls), copy_peak)
    print("\n".join(summary))
    if table:
        table.write("\n" + "\n".join(summary) + "\n")
        table.close()
        print(f"table written to {args.out}")
    # Exit status 1 only if one of ours broke the contract (Inductor's deviations are data).
    ours_wrong = any(
        p.split(":", 1)[0] in impls for r in results for p in r["check"].split("; ")
    )
    return 1 if ours_wrong else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:  # needs no GPU
        print("\n".join(c.name for c in cases()))
        return 0
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton
    else:
        import torch

        if not torch.cuda.is_available():
            print(
                "bench/kernels.py: no GPU (torch.cuda.is_available() is False); this "
                "benchmark needs CUDA or ROCm. `--dry-run` checks it on the CPU.",
                file=sys.stderr,
            )
            return 2
    try:
        import triton  # noqa: F401
    except ImportError:
        print(
            "bench/kernels.py: triton is not installed (pip install 'vllm-xdsl[triton]')",
            file=sys.stderr,
        )
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
