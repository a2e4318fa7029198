"""Timing one implementation on one set of inputs.

- CPU: `time.perf_counter` around each call, after warm-up calls; the minimum of N runs
  (the least disturbed run: on a loaded machine every other statistic measures the load).
- GPU: CUDA events around each call only, after warm-up; before each call the L2 cache is
  flushed by writing a buffer larger than it (outside the events); the median of N runs.

Nothing but the call is timed: inputs (and the copies an in-place kernel overwrites) are
made before the timed region. N adapts to the time slice given, within [min_runs, max_runs].
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

_L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any GPU's L2 (H100/H200: 50-60 MiB)
# The clock CPU timings (and the give-up probe) read, looked up at each measurement rather
# than bound at import: the tests substitute a virtual one, so that which candidate wins
# does not depend on the load of the machine they run on.
_clock: Callable[[], float] = time.perf_counter


@dataclass(frozen=True)
class Timing:
    us: float  # the statistic (min on the CPU, median on a GPU), microseconds
    runs: int
    method: str


def _sync(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def measure(
    fn: Callable[..., Any], args: dict[str, Any], device: str, slice_s: float,
    min_runs: int = 5, max_runs: int = 200, warmup: int = 2, probe: int = 2,
    give_up_us: float | None = None,
) -> Timing:
    """Time `fn(**args)` on `device` within about `slice_s` seconds. If a probe after the
    warm-up already takes over `give_up_us` per call, return the probe (it cannot win)."""
    with torch.inference_mode():
        for _ in range(warmup):  # first calls pay for compiling and caches: never timed
            fn(**args)
        _sync(device)
        t0 = _clock()
        for _ in range(probe):
            fn(**args)
        _sync(device)
        estimate = (_clock() - t0) / probe
        if give_up_us is not None and estimate * 1e6 > give_up_us:
            return Timing(estimate * 1e6, probe, "probe mean (far slower than the best)")
        runs = int(min(max_runs, max(min_runs, slice_s / max(estimate, 1e-7))))
        if device == "cpu":
            return _cpu(fn, args, runs)
        return _gpu(fn, args, runs)


def _cpu(fn: Callable[..., Any], args: dict[str, Any], runs: int) -> Timing:
    best = float("inf")
    clock = _clock
    for _ in range(runs):
        t = clock()
        fn(**args)
        best = min(best, clock() - t)
    return Timing(best * 1e6, runs, "perf_counter min")


def _gpu(fn: Callable[..., Any], args: dict[str, Any], runs: int) -> Timing:
    flush = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for i in range(runs):
        flush.zero_()  # evict the inputs from L2 (not timed)
        starts[i].record()
        fn(**args)
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
    return Timing(times[len(times) // 2] * 1e3, runs, "cuda events median, L2 flushed")
