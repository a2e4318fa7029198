"""Graphs with collectives: a 2-process gloo run on the CPU compiles a tensor-parallel
block (sharded linears, all_reduce, RMSNorm, SiLU-and-mul) with the backend and matches
eager on every rank."""

from __future__ import annotations

import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HIDDEN, INTER, WORLD = 64, 128, 2


class TensorParallelBlock(torch.nn.Module):
    """RMSNorm (HF style) -> column-parallel gate/up -> SiLU-and-mul -> row-parallel down
    -> all_reduce -> residual add."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)  # the same full weights on every rank
        self.norm_weight = torch.nn.Parameter(1 + 0.1 * torch.randn(HIDDEN, generator=g))
        gate = torch.randn(INTER, HIDDEN, generator=g) / HIDDEN**0.5
        up = torch.randn(INTER, HIDDEN, generator=g) / HIDDEN**0.5
        down = torch.randn(HIDDEN, INTER, generator=g) / INTER**0.5
        shard = INTER // WORLD
        rows = slice(rank * shard, (rank + 1) * shard)
        self.gate_up = torch.nn.Parameter(torch.cat([gate[rows], up[rows]]))
        self.down = torch.nn.Parameter(down[:, rows].contiguous())
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        h = self.norm_weight * h.to(x.dtype)
        gate_up = F.linear(h, self.gate_up)
        d = gate_up.shape[-1] // 2
        partial = F.linear(F.silu(gate_up[..., :d]) * gate_up[..., d:], self.down)
        dist.all_reduce(partial)
        return x + partial


def _worker(rank: int, init_file: str, dump_dir: str) -> None:
    os.environ["VLLM_XDSL_DUMP_DIR"] = os.path.join(dump_dir, f"rank{rank}")
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=WORLD)
    torch.manual_seed(1)
    block = TensorParallelBlock(rank)
    from vllm_xdsl import compile as backend

    compiled = torch.compile(block, backend="vllm_xdsl", dynamic=True,
                             options={"inner": "eager", "strict": True})
    with torch.no_grad():
        for tokens in (3, 11):
            x = torch.randn(tokens, HIDDEN)  # same on both ranks (same seed)
            torch.testing.assert_close(compiled(x), block(x), atol=1e-5, rtol=1.3e-6)
    counts = backend.RESULTS.last.stages[1].op_counts  # after raise-native
    assert counts["vllm.rms_norm"] == 1 and counts["vllm.silu_and_mul"] == 1, counts
    (graph_dir,) = os.scandir(os.environ["VLLM_XDSL_DUMP_DIR"])
    with open(os.path.join(graph_dir.path, "00-import.mlir")) as f:
        imported = f.read()
    assert '"_c10d_functional::all_reduce.default"' in imported
    assert '"_c10d_functional::wait_tensor.default"' in imported
    assert backend.RESULTS.count == 1, "one compile for every token count"
    # Both ranks finish before either tears gloo down: a rank that got there first once
    # aborted its peer in CI ("terminate called without an active exception", SIGABRT).
    # A rank that fails leaves the group alone; spawn then stops the other, wherever it waits.
    dist.barrier()
    dist.destroy_process_group()


def test_tensor_parallel_block_gloo() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        mp.spawn(_worker, args=(init_file, tmp), nprocs=WORLD, join=True)
