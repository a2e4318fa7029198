// RUN: vllm-opt %s --lower-dispatch="target=cuda report=true" 2>&1 | filecheck %s

// In-place kernels only where the IR proves the overwritten input is dead after the op
// and nobody else owns it; otherwise a copy (in-place impl) or the out-of-place variant.
// cuda's fused_add_rms_norm is registered in place (it always overwrites x and residual);
// cuda's rms_norm is out of place, with an `inplace` variant the lowering may pick.

// CHECK:      dispatch report: 5 node(s)
// CHECK-NEXT: @inplace %o: fused_add_rms_norm -> cuda
// CHECK-NEXT:     note: in place: overwrites x (its only use)
// CHECK-NEXT:     note: in place: overwrites residual (its only use)
// CHECK-NEXT: @inplace %y: rms_norm -> cuda
// CHECK-NEXT:     note: in place: overwrites x (its only use)
// CHECK-NEXT: @inplace %y2: rms_norm -> cuda
// CHECK-NEXT:     note: out of place: x: it may alias an input of aten::view.default (a view)
// CHECK-NEXT: @inplace %o3: fused_add_rms_norm -> cuda
// CHECK-NEXT:     note: copied x for the in-place kernel: it has another use
// CHECK-NEXT:     note: in place: overwrites residual (its only use)
// CHECK-NEXT: @inplace %y4: rms_norm -> cuda
// CHECK-NEXT:     note: out of place: x: it is a module constant

// CHECK-LABEL: func.func @inplace
func.func @inplace(%a: tensor<?x4096xbf16>, %b: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<7x4096xbf16>) {
  // Fresh values with no other use: overwritten in place, no copy.
  // CHECK:      %x = torch.call "aten::add.Tensor"
  // CHECK-NEXT: %r = torch.call "aten::mul.Tensor"
  // CHECK-NEXT: %o, %ro = cuda.fused_add_rms_norm %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-06 : f64, vec_width = 8 : i64, inplace}
  %x = torch.call "aten::add.Tensor"(%a, %b) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xbf16>, tensor<?x4096xbf16>) -> tensor<?x4096xbf16>
  %r = torch.call "aten::mul.Tensor"(%a, %b) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xbf16>, tensor<?x4096xbf16>) -> tensor<?x4096xbf16>
  %o, %ro = vllm.fused_add_rms_norm %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  // The result of the previous kernel, used once: the in-place variant.
  // CHECK-NEXT: %y = cuda.rms_norm %o weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-06 : f64, vec_width = 8 : i64, inplace}
  %y = vllm.rms_norm %o weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  // A view of the caller's %a: writing it would write %a. Out of place.
  // CHECK-NEXT: %v = torch.call "aten::view.default"(%a)
  // CHECK-NEXT: %y2 = cuda.rms_norm %v {epsilon = 1.000000e-06 : f64, vec_width = 8 : i64} :
  %v = torch.call "aten::view.default"(%a) [#torch.operand<0>, [-1 : i64, 4096 : i64]] : (tensor<?x4096xbf16>) -> tensor<?x4096xbf16>
  %y2 = vllm.rms_norm %v {epsilon = 1.0e-06 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  // %y is also returned: the in-place kernel gets a copy of it; %ro is used only here.
  // CHECK-NEXT: %y_copy = torch.call "aten::clone.default"(%y) [#torch.operand<0>] : (tensor<?x4096xbf16>) -> tensor<?x4096xbf16>
  // CHECK-NEXT: %o3, %ro3 = cuda.fused_add_rms_norm %y_copy, %ro {epsilon = 1.000000e-06 : f64, vec_width = 8 : i64, inplace}
  %o3, %ro3 = vllm.fused_add_rms_norm %y, %ro {epsilon = 1.0e-06 : f64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  // A module constant belongs to the model, even when this is its only use.
  // CHECK-NEXT: %c = torch.get_attr "buffer"
  // CHECK-NEXT: %y4 = cuda.rms_norm %c {epsilon = 1.000000e-06 : f64, vec_width = 8 : i64} :
  %c = torch.get_attr "buffer" : tensor<7x4096xbf16>
  %y4 = vllm.rms_norm %c {epsilon = 1.0e-06 : f64} : tensor<7x4096xbf16> -> tensor<7x4096xbf16>
  // CHECK-NEXT: func.return %y, %y2, %o3, %ro3, %ro3, %y4
  func.return %y, %y2, %o3, %ro3, %ro3, %y4 : tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<7x4096xbf16>
}
