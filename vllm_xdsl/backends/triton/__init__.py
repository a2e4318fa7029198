"""The Triton backend: kernels generated from `triton` provider ops, launched from torch.

    spec.KernelSpec          what decides one kernel's source (maps 1:1 onto the op's attributes)
    emit.emit_source(spec)   the readable source (`vllm-opt -t triton` prints it)
    templates                one template per family: norm (+add, +quant), quant, act-and-mul (+quant)
    compile.get_kernel(spec) the jitted kernel, compiled once per spec
    functions.<op>           launchers with exactly the native signatures (docs/OPS.md)
    torch_ops                the same as torch ops `torch.ops.vllm_xdsl_triton.<op>`
    register.register()      provider "triton" in the ops registry (provider.py calls it)
    from_ir / target         provider op -> spec, and the `-t triton` target

Importing this package (or register.py) never imports Triton: it is an optional extra.
"""
