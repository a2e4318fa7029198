"""register(): provider "rocm": the CUDA sources compiled with hipcc (csrc/compat.h maps the
runtime names), wrapped as torch ops `vllm_xdsl_rocm::<op>`. fp8 results may be e4m3fnuz
(gfx94x, FMAX 224) or e4m3fn (gfx950): the flavour follows the requested dtype."""

from vllm_xdsl.backends.cuda.register import register as _register


def register() -> None:
    _register("rocm")
