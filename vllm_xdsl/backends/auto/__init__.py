"""The runtime of the `auto` dialect: the torch ops that call a tuned winner per token count.

The exporter loads `torch_ops` on the first `auto.<op>` it exports (as it loads any
provider's torch ops); the tuner that fills the tables lives in vllm_xdsl.tune.
"""
