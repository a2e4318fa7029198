"""The cpu provider's kernel library at another revision against this tree's, interleaved.

    python bench/cpu_kernels_ab.py [--base HEAD] [--tokens 1,64,1024] [--hidden 2048]

For work on the kernels themselves (backends/cpu/csrc, backends/cuda/csrc): it builds the
kernel library twice with the provider's own compile command, from `--base` (git archive)
and from the working tree, loads both, and times their launchers on the same inputs, one
after the other in rounds, so that a busy or noisy machine slows both alike. Every case
also checks that both builds write the same bytes: a change that moves a bit is reported
(and fails the run) before any speed is.

It prints µs per call (the minimum over rounds) and base / tree (above 1: the tree is
faster). The launchers are called through ctypes, so a call costs a little more than one
from a compiled graph; the kernels are bf16, the int8 quants with the default numerics.
Without vLLM or a GPU: any x86-64 host the provider runs on (AVX2 + FMA + F16C).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BF16_EPS = 1e-6


def build(tag: str, root: Path, out_dir: Path) -> ctypes.CDLL:
    """The kernel library of the sources under `root` (a checkout's top), loaded."""
    from vllm_xdsl.backends.cuda import build as B
    from vllm_xdsl.backends.cuda import library as L

    cpu_csrc = root / B.CPU_CSRC.relative_to(REPO)
    cuda_csrc = root / B.CSRC.relative_to(REPO)
    out = out_dir / f"vx_cpu_{tag}.so"
    main = cpu_csrc / B.MAIN_SOURCES["cpu"]
    cmd = [str(cuda_csrc) if a == str(B.CSRC) else a
           for a in B.compile_command("cpu", B.find_compiler("cpu"), ("native",), main, out)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"cpu_kernels_ab: building the {tag} library failed:\n{res.stderr[-2000:]}")
    lib = ctypes.CDLL(str(out))
    for name, argtypes in L.SIGNATURES.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return lib


def cases(tokens: int, hidden: int) -> Iterator[tuple[str, Callable[[ctypes.CDLL], int], list]]:
    """(name, launch, the tensors it writes) for each kernel timed."""
    import torch

    from vllm_xdsl.backends.cuda import library as L

    bf = L.DTYPE_CODES["bfloat16"]
    gen = torch.Generator().manual_seed(tokens * 7919 + hidden)
    x = (torch.randn(tokens, hidden, generator=gen) * 3).to(torch.bfloat16)
    r = torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16)
    w = torch.randn(hidden, generator=gen).to(torch.bfloat16)
    gate_up = torch.randn(tokens, 2 * hidden, generator=gen).to(torch.bfloat16)
    scale = torch.tensor([0.02])
    out, res_out = torch.empty_like(x), torch.empty_like(x)
    q = torch.empty(tokens, hidden, dtype=torch.int8)
    scales = torch.empty(tokens, dtype=torch.float32)
    p = torch.Tensor.data_ptr
    T, H = tokens, hidden

    def quant(scheme: int, fp8: bool = False) -> tuple:
        """VX_QUANT_ARGS: static schemes read `scale`, per-token ones store one per row."""
        static = scheme in (L.S_STATIC_FP8, L.S_STATIC_I8)
        qmax = 448.0 if fp8 else 127.0
        return (p(scale) if static else None, None, scheme, 0, qmax, 0, 0 if static else 1, 0,
                0, 0.0, None)

    i8s, i8t = quant(L.S_STATIC_I8), quant(L.S_TOKEN_I8)
    yield "rms_norm", lambda lib: lib.vx_rms_norm(
        p(out), p(x), p(w), T, H, H, H, BF16_EPS, bf, bf, None), [out]
    yield "fused_add_rms_norm", lambda lib: lib.vx_fused_add_rms_norm(
        p(out), p(res_out), p(x), p(r), p(w), T, H, H, H, H, H, BF16_EPS, 0, bf, bf, None), \
        [out, res_out]
    yield "silu_and_mul", lambda lib: lib.vx_act_and_mul(
        p(out), p(gate_up), None, T, H, 2 * H, 0, L.ACTIVATION_CODES["silu"], bf, None), [out]
    yield "static_scaled_int8_quant", lambda lib: lib.vx_quant(
        p(q), p(scale), p(x), T, H, H, *i8s, bf, None), [q]
    yield "dynamic_per_token_scaled_int8_quant", lambda lib: lib.vx_quant(
        p(q), p(scales), p(x), T, H, H, *i8t, bf, None), [q, scales]
    yield "rms_norm_quant[i8-static]", lambda lib: lib.vx_rms_norm_quant(
        p(q), p(scale), p(x), p(w), T, H, H, BF16_EPS, *i8s, bf, bf, None), [q]
    yield "rms_norm_quant[i8-token]", lambda lib: lib.vx_rms_norm_quant(
        p(q), p(scales), p(x), p(w), T, H, H, BF16_EPS, *i8t, bf, bf, None), [q, scales]
    yield "fused_add_rms_norm_quant[i8-static]", lambda lib: lib.vx_fused_add_rms_norm_quant(
        p(q), p(res_out), p(scale), p(x), p(r), p(w), T, H, H, H, BF16_EPS, 0, *i8s, bf, bf,
        None), [q, res_out]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="the git revision to compare against")
    ap.add_argument("--tokens", default="1,64,1024")
    ap.add_argument("--hidden", default="2048")
    ap.add_argument("--threads", type=int, default=1,
                    help="OpenMP threads of the kernel libraries (they link libgomp)")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    try:
        tokens = [int(t) for t in args.tokens.split(",")]
        hiddens = [int(h) for h in args.hidden.split(",")]
    except ValueError:
        ap.error("--tokens and --hidden take comma-separated integers")
    if args.threads < 1 or args.rounds < 1:
        ap.error("--threads and --rounds take a positive integer")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before libgomp starts

    import torch

    sys.path.insert(0, str(REPO))
    from vllm_xdsl.backends.cpu.host import host_problem

    problem = host_problem()
    if problem is not None:
        sys.exit(f"cpu_kernels_ab: {problem}")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        base_root = Path(tmp) / "base"
        base_root.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.base, "vllm_xdsl/backends"],
            capture_output=True, check=False)
        if archive.returncode != 0:
            sys.exit(f"cpu_kernels_ab: no revision {args.base!r}: "
                     f"{archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(base_root)], input=archive.stdout, check=True)
        libs = {"base": build("base", base_root, Path(tmp)), "tree": build("tree", REPO, Path(tmp))}
        print(f"base {args.base} against the working tree; bf16; {args.threads} thread(s); "
              f"µs per call, min of {args.rounds} interleaved rounds")
        print(f"{'H':>5} {'T':>5}  {'kernel':38} {'base':>9} {'tree':>9}  base/tree")
        differ = []
        for H in hiddens:
            for T in tokens:
                for name, launch, written in cases(T, H):
                    got = {}
                    for tag, lib in libs.items():
                        for t in written:
                            t.zero_()
                        if launch(lib) != 0:
                            sys.exit(f"cpu_kernels_ab: {name} failed in the {tag} library")
                        got[tag] = [t.view(torch.uint8).clone() for t in written]
                    pairs = zip(got["base"], got["tree"], strict=True)
                    if not all(torch.equal(a, b) for a, b in pairs):
                        differ.append(f"{name} H={H} T={T}")
                    calls = max(3, 4096 // T)
                    best = {tag: float("inf") for tag in libs}
                    for _ in range(args.rounds):
                        for tag, lib in libs.items():
                            start = time.perf_counter()
                            for _ in range(calls):
                                launch(lib)
                            best[tag] = min(best[tag], (time.perf_counter() - start) / calls)
                    print(f"{H:5d} {T:5d}  {name:38} {best['base'] * 1e6:9.2f} "
                          f"{best['tree'] * 1e6:9.2f}  {best['base'] / best['tree']:9.3f}")
    if differ:
        print("the two builds wrote different bytes: " + "; ".join(differ))
        return 1
    print("the two builds wrote the same bytes in every case")
    return 0


if __name__ == "__main__":
    sys.exit(main())
