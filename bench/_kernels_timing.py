"""How bench/kernels.py times a call: the device time of its kernels through a CUDA graph,
or the call itself; and the copy bandwidth it is compared with. (A leading underscore:
bench/run_all.py runs every other bench/*.py as a benchmark.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class Timer:
    """Median seconds per call, and how it was measured.

    On a GPU (mode "kernel", the default) the call is captured once into a CUDA graph and
    the graph's replays are timed (triton.testing.do_bench: CUDA events, L2 flushed before
    each), so the time is the device's: the kernels the call launches, without the host's
    cost of making it. The issue's targets compare kernels, and below ~16384 tokens the
    host's 50-75 us per call (H200 host, session 2) would otherwise be what is measured.
    A call that cannot be captured is timed as a call (how "call"), and so is every call in
    mode "call". On the CPU (dry run): wall clock ("wall")."""

    def __init__(self, gpu: bool, mode: str = "kernel") -> None:
        self.gpu, self.mode = gpu, mode
        self.capture_failures: dict[str, str] = {}

    def __call__(self, fn: Callable[[], Any], label: str = "") -> tuple[float, str]:
        if not self.gpu:
            fn()
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            return sorted(times)[1], "wall"
        from triton.testing import do_bench

        if self.mode == "kernel":
            try:
                graph = capture(fn)
            except Exception as e:  # noqa: BLE001 - any failure: time the plain call instead
                self.capture_failures.setdefault(label, f"{type(e).__name__}: {e}".split("\n")[0])
            else:
                seconds = do_bench(graph.replay, warmup=5, rep=25, return_mode="median") * 1e-3
                del graph  # frees the graph's memory pool
                return seconds, "kernel"
        return do_bench(fn, warmup=5, rep=25, return_mode="median") * 1e-3, "call"


def capture(fn: Callable[[], Any]):
    """A CUDA graph of one call of `fn` (warmed up on a side stream first, as torch asks)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    finally:
        torch.cuda.synchronize()  # a failed capture must not leave work in flight
    return graph


def copy_bandwidth(timer: Timer, device: str, nbytes_total: int) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + written per second)."""
    import torch

    src = torch.empty(nbytes_total // 2, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * src.numel() / timer(lambda: dst.copy_(src), "copy")[0] / 1e9
