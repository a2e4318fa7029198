// RUN: vllm-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s

// Opaque torch calls keep the overload, literal arguments, kwargs and every result.

// CHECK-LABEL: func.func @opaque
func.func @opaque(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>, %n: i64) -> tensor<?x64xbf16> {
  // CHECK-NEXT: %w = torch.get_attr "layers.0.weight" : tensor<64xbf16>
  %w = torch.get_attr "layers.0.weight" : tensor<64xbf16>
  // CHECK-NEXT: %s = torch.call "aten::add.Tensor"(%a, %b) [#torch.operand<0>, #torch.operand<1>] kwargs {alpha = 1 : i64} : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  %s = torch.call "aten::add.Tensor"(%a, %b) [#torch.operand<0>, #torch.operand<1>] kwargs {alpha = 1 : i64} : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  // CHECK-NEXT: %c = torch.call "prims::convert_element_type.default"(%s) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %c = torch.call "prims::convert_element_type.default"(%s) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  // CHECK-NEXT: %v = torch.call "aten::view.default"(%c, %n) [#torch.operand<0>, [#torch.operand<1>, 64 : i64]] : (tensor<?x64xf32>, i64) -> tensor<?x64xf32>
  %v = torch.call "aten::view.default"(%c, %n) [#torch.operand<0>, [#torch.operand<1>, 64 : i64]] : (tensor<?x64xf32>, i64) -> tensor<?x64xf32>
  // CHECK-NEXT: %p, %q = torch.call "aten::split.Tensor"(%a) [#torch.operand<0>, 32 : i64, -1 : i64] : (tensor<?x64xbf16>) -> (tensor<?x32xbf16>, tensor<?x32xbf16>)
  %p, %q = torch.call "aten::split.Tensor"(%a) [#torch.operand<0>, 32 : i64, -1 : i64] : (tensor<?x64xbf16>) -> (tensor<?x32xbf16>, tensor<?x32xbf16>)
  // CHECK-NEXT: %m = torch.call "aten::mean.dim"(%c) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %m = torch.call "aten::mean.dim"(%c) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  // CHECK-NEXT: %e = torch.call "aten::empty.memory_format"(%n) {{\[\[}}#torch.operand<0>{{\]\]}} kwargs {dtype = #torch.dtype<bf16>, device = #torch.device<"cpu">, pin_memory = false, layout = #torch.none, memory_format = #torch.enum<"torch.contiguous_format">} : (i64) -> tensor<?xbf16>
  %e = torch.call "aten::empty.memory_format"(%n) [[#torch.operand<0>]] kwargs {dtype = #torch.dtype<bf16>, device = #torch.device<"cpu">, pin_memory = false, layout = #torch.none, memory_format = #torch.enum<"torch.contiguous_format">} : (i64) -> tensor<?xbf16>
  // CHECK-NEXT: %k = torch.call "aten::sym_size.int"(%a) [#torch.operand<0>, 0 : i64] : (tensor<?x64xbf16>) -> i64
  %k = torch.call "aten::sym_size.int"(%a) [#torch.operand<0>, 0 : i64] : (tensor<?x64xbf16>) -> i64
  // CHECK-NEXT: torch.call "_c10d_functional::wait_tensor.default"(%s) [#torch.operand<0>] : (tensor<?x64xbf16>) -> ()
  torch.call "_c10d_functional::wait_tensor.default"(%s) [#torch.operand<0>] : (tensor<?x64xbf16>) -> ()
  func.return %s : tensor<?x64xbf16>
}
