"""Loaded by the ops registry (vllm_xdsl.ops.registry): registers provider "cuda"."""

from vllm_xdsl.backends.cuda.register import register

register("cuda")
