"""Loaded by the ops registry (vllm_xdsl.ops.registry): registers provider "triton"."""

from vllm_xdsl.backends.triton.register import register

register()
