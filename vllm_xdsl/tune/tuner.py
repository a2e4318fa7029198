"""Measure every eligible implementation of an op per shape bucket; keep the fastest
correct one.

For each bucket (token bound T), on synthetic inputs of that shape (bucket.synth_args):
1. correctness first: each candidate's outputs against native with the OPS.md tolerances
   (the check `python -m vllm_xdsl.verify` uses), at T and at the smallest count of the
   bucket; a wrong candidate is excluded (here and in every larger bucket) and reported;
2. timing (measure.py) of each correct candidate; the fastest wins;
3. a candidate more than PRUNE_RATIO times slower than the winner is not measured in
   larger buckets (a Triton interpreter or a naive kernel would eat the budget).
Buckets are tuned smallest first within a time budget; buckets left when it runs out take
the previous bucket's winner (reported, not cached). Results are cached (cache.py).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from vllm_xdsl.ops.impl import Impl
from vllm_xdsl.ops.policy import DispatchError
from vllm_xdsl.tune import cache
from vllm_xdsl.tune.bucket import Bucket, device_of, synth_args
from vllm_xdsl.tune.measure import measure

logger = logging.getLogger("vllm_xdsl.tune")

TABLE_ENV = "VLLM_XDSL_TUNE_TABLE"  # a given table (JSON), used before the cache
BUDGET_ENV = "VLLM_XDSL_TUNE_BUDGET"  # seconds per tuning call (all buckets of one op)
MAX_TOKENS_ENV = "VLLM_XDSL_TUNE_MAX_TOKENS"  # largest bucket the lowering tunes
DEFAULT_BUDGET_S = 60.0
DEFAULT_MAX_TOKENS = 4096
PRUNE_RATIO = 8.0
_SLICE_MAX_S = 0.2  # timing slice per candidate and bucket, at most


@dataclass
class Stats:
    """What this process did: candidate timings run, buckets served from the cache, time."""

    measured: int = 0
    cached: int = 0
    tuning_s: float = 0.0


STATS = Stats()
_local = threading.local()


def tuning_now() -> bool:
    """True while a tuning call runs on this thread (nested auto dispatch uses native)."""
    return getattr(_local, "active", False)


def budget_s() -> float:
    return float(os.environ.get(BUDGET_ENV) or DEFAULT_BUDGET_S)


def max_tokens() -> int:
    return int(os.environ.get(MAX_TOKENS_ENV) or DEFAULT_MAX_TOKENS)


@dataclass(frozen=True)
class Candidate:
    provider: str
    impl: Impl
    hash: str


@dataclass
class BucketResult:
    """The outcome of one bucket: times (us) of the correct candidates and the winner."""

    bucket: Bucket
    winner: str
    times: dict[str, float] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)  # wrong results
    pruned: dict[str, str] = field(default_factory=dict)  # not measured (too slow before)
    hashes: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    method: str = ""
    source: str = "measured"  # measured | cache | budget

    def to_json(self) -> dict[str, Any]:
        return {"op": self.bucket.op, "target": self.bucket.target, "tokens": self.bucket.tokens,
                "shape": self.bucket.shape, "winner": self.winner, "times_us": self.times,
                "excluded": self.excluded, "pruned": self.pruned, "hashes": self.hashes,
                "seconds": round(self.seconds, 4), "method": self.method}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> BucketResult:
        b = Bucket(d["op"], d["target"], int(d["tokens"]), d["shape"])
        return BucketResult(b, str(d["winner"]), dict(d.get("times_us", {})),
                            dict(d.get("excluded", {})), dict(d.get("pruned", {})),
                            dict(d.get("hashes", {})), float(d.get("seconds", 0.0)),
                            str(d.get("method", "")), "cache")


class Table:
    """The tuned buckets of one target: the cache file's, plus what this process measured."""

    _tables: dict[str, Table] = {}  # per target, cache file and given table

    def __init__(self, target: str) -> None:
        self.target = target
        self.entries: dict[str, Any] = cache.load(target)
        self.replay: dict[str, Any] = _replay(target)

    @classmethod
    def of(cls, target: str) -> Table:
        key = f"{target}|{cache.cache_path()}|{os.environ.get(TABLE_ENV)}"
        if key not in cls._tables:
            cls._tables[key] = cls(target)
        return cls._tables[key]

    @classmethod
    def forget(cls) -> None:
        """Drop the in-memory tables (the next lookup reads the cache file again)."""
        cls._tables.clear()

    def lookup(self, bucket: Bucket, candidates: Sequence[Candidate]) -> BucketResult | None:
        """The cached result, if it measured exactly these candidates at these sources."""
        given = self.replay.get(bucket.key)
        if given is not None and given.get("winner") in {c.provider for c in candidates}:
            result = BucketResult.from_json({**given, **bucket_fields(bucket)})
            result.source = "table"
            return result
        raw = self.entries.get(bucket.key)
        if raw is None:
            return None
        try:
            result = BucketResult.from_json(raw)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if result.hashes != {c.provider: c.hash for c in candidates}:
            return None  # a candidate came, went or changed: measure again
        return result

    def store(self, results: Sequence[BucketResult]) -> None:
        new = {r.bucket.key: r.to_json() for r in results if r.source == "measured"}
        if new:
            self.entries.update(new)
            cache.save(self.target, new)


def bucket_fields(b: Bucket) -> dict[str, Any]:
    return {"op": b.op, "target": b.target, "tokens": b.tokens, "shape": b.shape}


def _replay(target: str) -> dict[str, Any]:
    """The entries of the table named by VLLM_XDSL_TUNE_TABLE (e.g. tuned on the target
    machine and shipped): used as given, whatever the environment, before the cache."""
    path = os.environ.get(TABLE_ENV)
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text())
        if "environments" in data:
            data = data["environments"].get(target, {"entries": {}})
        entries = data["entries"]
        if not isinstance(entries, dict) or not all(
                isinstance(v, dict) and isinstance(v.get("winner"), str) for v in entries.values()):
            raise ValueError("entries must map bucket keys to objects with a 'winner'")
        return entries
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise DispatchError(f"{TABLE_ENV}={path}: not a tuning table ({e})") from None


def measure_problem(target: str) -> str | None:
    """Why this machine cannot measure for `target` (None if it can)."""
    if target == "cpu":
        return None
    hip = torch.version.hip is not None
    if not torch.cuda.is_available() or hip != (target == "rocm"):
        return (f"there is no {target} device here to measure on (tune on the target "
                f"machine and pass its table in {TABLE_ENV}, or name the providers)")
    return None


def candidates_of(impls: Sequence[Impl]) -> list[Candidate]:
    return [Candidate(i.provider, i, cache.impl_hash(i.fn)) for i in impls]


def tune(
    op: Any, meta: Mapping[str, Any], bucket: Bucket, tokens: Sequence[int],
    candidates: Sequence[Candidate], budget: float | None = None,
) -> list[BucketResult]:
    """Results for `bucket` at each token bound in `tokens` (ascending), from the cache
    or measured now; measured ones are saved."""
    table = Table.of(bucket.target)
    budget = budget_s() if budget is None else budget
    start = time.perf_counter()
    results: list[BucketResult] = []
    dropped: dict[str, str] = {}  # provider -> why it is not measured any more
    _local.active = True
    try:
        for i, t in enumerate(tokens):
            b = bucket.with_tokens(t)
            result = table.lookup(b, candidates)
            if result is not None:
                STATS.cached += 1
            else:
                left = budget - (time.perf_counter() - start)
                if left <= 0 and results:
                    prev = results[-1]
                    result = BucketResult(b, prev.winner, source="budget")
                else:
                    problem = measure_problem(b.target)
                    if problem is not None:
                        raise DispatchError(f"{b.op}: priority 'auto' for {b}: {problem}")
                    slice_s = max(0.002, min(_SLICE_MAX_S, left / max(1, (len(tokens) - i)
                                                                   * len(candidates))))
                    # Real tensors, even when called from a compiler backend (where a fake
                    # or proxy mode is active).
                    with _disable_current_modes():
                        result = _measure_bucket(op, meta, b, candidates, dropped, slice_s)
            results.append(result)
            _drop_losers(result, dropped)
    finally:
        _local.active = False
        elapsed = time.perf_counter() - start
        STATS.tuning_s += elapsed
    table.store(results)
    return results


def _drop_losers(result: BucketResult, dropped: dict[str, str]) -> None:
    for p in result.excluded:
        dropped.setdefault(p, f"wrong result at T<={result.bucket.tokens}")
    for p, why in result.pruned.items():
        dropped.setdefault(p, why)
    if result.times:
        best = min(result.times.values())
        for p, us in result.times.items():
            if us > PRUNE_RATIO * best:
                dropped.setdefault(p, f"over {PRUNE_RATIO:g}x slower than {result.winner} at "
                                      f"T<={result.bucket.tokens} ({us:.1f} vs {best:.1f} us)")


def _measure_bucket(
    op: Any, meta: Mapping[str, Any], bucket: Bucket, candidates: Sequence[Candidate],
    dropped: dict[str, str], slice_s: float,
) -> BucketResult:
    from vllm_xdsl.ops.grid import Case
    from vllm_xdsl.verify import check_case

    t0 = time.perf_counter()
    device = device_of(bucket.target)
    result = BucketResult(bucket, "native", hashes={c.provider: c.hash for c in candidates})
    args = synth_args(meta, bucket.tokens, device)
    small = bucket.tokens // 2 + 1
    checks = [args] if small >= bucket.tokens else [args, synth_args(meta, small, device, 1)]
    dtype = args["x"].dtype if isinstance(args.get("x"), torch.Tensor) else torch.float32
    best = float("inf")
    # Native first: a cheap reference time that lets a hopeless candidate stop after warm-up.
    for c in sorted(candidates, key=lambda c: c.provider != "native"):
        if c.provider in dropped and c.provider != "native":
            result.pruned[c.provider] = dropped[c.provider]
            continue
        if c.provider != "native":
            problem = None
            for a in checks:
                case = Case(op.name, dtype, tuple(a.values()), f"T={_tokens(a)}")
                problem, _ = check_case(op, c.impl.fn, case)
                if problem is not None:
                    break
            if problem is not None:
                result.excluded[c.provider] = problem
                logger.warning("autotune: %s excluded for %s: %s", c.provider, bucket, problem)
                continue
        timed_args = _fresh_inputs(op, c, args)
        timing = measure(c.impl.fn, timed_args, device, slice_s,
                         give_up_us=PRUNE_RATIO * best if best < float("inf") else None)
        STATS.measured += 1
        result.times[c.provider] = round(timing.us, 3)
        if timing.runs > 2 or not result.method:
            result.method = timing.method
        best = min(best, timing.us)
    result.winner = min(result.times, key=result.times.__getitem__)
    result.seconds = time.perf_counter() - t0
    logger.info("autotune %s: %s in %.3f s (%s)", bucket, _summary(result), result.seconds,
                result.method)
    return result


def _fresh_inputs(op: Any, c: Candidate, args: dict[str, Any]) -> dict[str, Any]:
    """An in-place kernel overwrites its inputs: give it its own copies, made here, outside
    the timed region (it then runs repeatedly on them; the timing does not depend on the
    values)."""
    if not c.impl.inplace:
        return args
    names = set(op.inplace_outputs.values())
    return {k: v.clone() if k in names and isinstance(v, torch.Tensor) else v
            for k, v in args.items()}


def _tokens(args: dict[str, Any]) -> int:
    x = args.get("x")
    return x.shape[0] if isinstance(x, torch.Tensor) else 0


def _summary(r: BucketResult) -> str:
    parts = [f"{p} {us:.1f} us" + (" *" if p == r.winner else "") for p, us in r.times.items()]
    parts += [f"{p} excluded" for p in r.excluded]
    parts += [f"{p} pruned" for p in r.pruned]
    return ", ".join(parts)
