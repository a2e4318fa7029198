"""Loaded by the ops registry (vllm_xdsl.ops.registry): registers provider "rocm"."""

from vllm_xdsl.backends.rocm.register import register

register()
