// RUN: vllm-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s
// RUN: vllm-opt %s -p raise-native,fuse-norm-quant,lower-dispatch | filecheck %s --check-prefix=PASSES

// Opaque objects (vLLM's attention layer name, a script object) are function arguments
// and call operands like any value; a mutating op that reads one stays an opaque call.

// CHECK-LABEL: func.func @layer_name
// CHECK-SAME: %name: !torch.opaque<"vllm.utils.torch_utils.LayerName">
func.func @layer_name(%q: tensor<?x4x32xbf16>, %name: !torch.opaque<"vllm.utils.torch_utils.LayerName">, %out: tensor<?x4x32xbf16>) -> tensor<?x4x32xbf16> {
  // CHECK-NEXT: %a, %b = torch.call "higher_order::auto_functionalized_v2"(%q, %name, %out) [#torch.enum<"torch.ops.vllm.unified_attention_with_output.default">] kwargs {query = #torch.operand<0>, layer_name = #torch.operand<1>, _all_bases = [#torch.operand<2>]} : (tensor<?x4x32xbf16>, !torch.opaque<"vllm.utils.torch_utils.LayerName">, tensor<?x4x32xbf16>) -> (!torch.none_type, tensor<?x4x32xbf16>)
  // PASSES: torch.call "higher_order::auto_functionalized_v2"(%q, %name, %out)
  %a, %b = torch.call "higher_order::auto_functionalized_v2"(%q, %name, %out) [#torch.enum<"torch.ops.vllm.unified_attention_with_output.default">] kwargs {query = #torch.operand<0>, layer_name = #torch.operand<1>, _all_bases = [#torch.operand<2>]} : (tensor<?x4x32xbf16>, !torch.opaque<"vllm.utils.torch_utils.LayerName">, tensor<?x4x32xbf16>) -> (!torch.none_type, tensor<?x4x32xbf16>)
  func.return %b : tensor<?x4x32xbf16>
}

// CHECK-LABEL: func.func @script_object
// CHECK-SAME: %obj: !torch.opaque<"__torch__.torch.classes.ns.Handle">
// CHECK-SAME: -> !torch.opaque<"__torch__.torch.classes.ns.Handle">
func.func @script_object(%obj: !torch.opaque<"__torch__.torch.classes.ns.Handle">) -> !torch.opaque<"__torch__.torch.classes.ns.Handle"> {
  func.return %obj : !torch.opaque<"__torch__.torch.classes.ns.Handle">
}
