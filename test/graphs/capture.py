"""Print the real aten graphs of the forms in native_forms.py, their IR, and the IR after
raise-native: `python test/graphs/capture.py [name ...] [--dtype bf16] [--mark-dynamic]
[--exact] [--fx]`. The IR printed parses with `vllm-opt` (save it as .mlir)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

import native_forms as forms  # noqa: E402

from vllm_xdsl.dialects import make_context  # noqa: E402
from vllm_xdsl.frontend import capture, import_graph  # noqa: E402
from vllm_xdsl.transforms.raising.raise_native import RaiseNativePass  # noqa: E402

H = 64
MODELS = {
    "llama_norm": (lambda: forms.LlamaRMSNorm(H), 1),
    "sqrt_div_norm": (lambda: forms.LlamaRMSNorm(H, sqrt_div=True), 1),
    "weight_before_cast": (lambda: forms.WeightBeforeCastNorm(H), 1),
    "gemma_norm": (lambda: forms.GemmaRMSNorm(H), 1),
    "residual_norm": (lambda: forms.ResidualNorm(H), 2),
    "vllm_fused_add": (lambda: forms.VllmFusedAddNorm(H), 2),
    "static_quant_div": (lambda: forms.StaticFp8Quant(H), 1),
    "static_quant_reciprocal": (lambda: forms.StaticFp8Quant(H, reciprocal=True), 1),
    "per_token_vllm": (lambda: forms.DynamicPerTokenFp8Quant(H), 1),
    "per_token_scale_ub": (lambda: forms.DynamicPerTokenFp8Quant(H, scale_ub=True), 1),
    "per_token_amax_div": (lambda: forms.DynamicPerTokenFp8Quant(H, vllm_form=False), 1),
    "silu_slice": (lambda: forms.SiluAndMul(H, "slice"), -1),
    "silu_split": (lambda: forms.SiluAndMul(H, "split"), -1),
    "silu_chunk": (lambda: forms.SiluAndMul(H, "chunk"), -1),
    "norm_then_quant": (lambda: forms.NormThenQuant(H), 1),
}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("names", nargs="*", help=f"forms to capture (default: all): {', '.join(MODELS)}")
    p.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    p.add_argument("--mark-dynamic", action="store_true", help="mark_dynamic instead of dynamic=True")
    p.add_argument("--exact", action="store_true")
    p.add_argument("--fx", action="store_true", help="also print the FX graph")
    args = p.parse_args()
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        p.error(f"unknown form {unknown[0]!r} (known: {', '.join(MODELS)})")
    dt = DTYPES[args.dtype]
    for name in args.names or MODELS:
        make, n_inputs = MODELS[name]
        torch.manual_seed(0)
        model = make().to(dt)
        # -1: one input of width 2H (SiLU-and-mul), else n inputs of width H.
        width, count = (2 * H, 1) if n_inputs < 0 else (H, n_inputs)
        inputs = [torch.randn(5, width, dtype=dt) for _ in range(count)]
        torch._dynamo.reset()
        if args.mark_dynamic:
            gm = capture(model, *inputs, dynamic=None, mark_dynamic={i: 0 for i in range(len(inputs))})
        else:
            gm = capture(model, *inputs, dynamic=True)
        print(f"// ===== {name} ({args.dtype}, {'mark_dynamic' if args.mark_dynamic else 'dynamic=True'})")
        if args.fx:
            print("// " + str(gm.graph).replace("\n", "\n// "))
        module = import_graph(gm).module
        print(module)
        RaiseNativePass(exact=args.exact).apply(make_context(), module)
        print("// ----- after raise-native")
        print(module)


if __name__ == "__main__":
    main()
