// RUN: vllm-opt %s -p raise-native | filecheck %s

// vLLM IR's norms as vLLM's engine hands them to the backend with the torch wrap on
// (mode 2, `ir_enable_torch_wrap`), spelled as in its graph: the residual norm is
// `fused_add_rms_norm.maybe_inplace` under auto_functionalized_v2, x the attention output
// read through a view with its buffer's own layout (`_x_alias`: it holds the base's
// contents), the weight read through `.data` (an alias).

// CHECK-LABEL: func.func @decoder_norms
// CHECK-NEXT:    %w = torch.call "aten::alias.default"(%arg0)
// CHECK-NEXT:    %n = vllm.rms_norm %arg2 weight(%w : tensor<128xbf16>) {epsilon = 1.000000e-06 : f64}
// CHECK-NEXT:    %y, %res = vllm.fused_add_rms_norm %arg1, %arg2 weight(%w : tensor<128xbf16>) {epsilon = 1.000000e-06 : f64}
// CHECK-NOT:     vllm_ir
// CHECK:         func.return
func.func @decoder_norms(%arg0: tensor<128xbf16>, %arg1: tensor<?x128xbf16>, %arg2: tensor<?x128xbf16>) -> (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>) {
  %w = torch.call "aten::alias.default"(%arg0) [#torch.operand<0>] : (tensor<128xbf16>) -> tensor<128xbf16>
  %n = torch.call "vllm_ir::rms_norm.default"(%arg2, %w) [#torch.operand<0>, #torch.operand<1>, 1.000000e-06 : f64] : (tensor<?x128xbf16>, tensor<128xbf16>) -> tensor<?x128xbf16>
  %y, %res, %x_new, %res_new = torch.call "higher_order::auto_functionalized_v2"(%w, %arg1, %arg2) [#torch.enum<"torch.ops.vllm_ir.fused_add_rms_norm.maybe_inplace">] kwargs {weight = #torch.operand<0>, epsilon = 1.000000e-06 : f64, variance_size = #torch.none, _x_base_index = 0 : i64, _x_alias = true, _x_residual_base_index = 1 : i64, _all_bases = [#torch.operand<1>, #torch.operand<2>]} : (tensor<128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>) -> (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>)
  func.return %n, %y, %res : tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x128xbf16>
}

// A slice of its base (`_x_slice_*`): the base's new contents are no value here, so the
// call stays as it is.

// CHECK-LABEL: func.func @slice_left_alone
// CHECK:         torch.call "higher_order::auto_functionalized_v2"
// CHECK-NOT:     vllm.fused_add_rms_norm
func.func @slice_left_alone(%arg0: tensor<128xbf16>, %arg1: tensor<?x256xbf16>, %arg2: tensor<?x128xbf16>) -> (tensor<?x128xbf16>, tensor<?x128xbf16>) {
  %y, %res, %x_new, %res_new = torch.call "higher_order::auto_functionalized_v2"(%arg0, %arg1, %arg2) [#torch.enum<"torch.ops.vllm_ir.fused_add_rms_norm.maybe_inplace">] kwargs {weight = #torch.operand<0>, epsilon = 1.000000e-06 : f64, variance_size = #torch.none, _x_base_index = 0 : i64, _x_slice_dim = 1 : i64, _x_slice_start = 0 : i64, _x_slice_end = 128 : i64, _x_residual_base_index = 1 : i64, _all_bases = [#torch.operand<1>, #torch.operand<2>]} : (tensor<128xbf16>, tensor<?x256xbf16>, tensor<?x128xbf16>) -> (tensor<?x128xbf16>, tensor<?x128xbf16>, tensor<?x256xbf16>, tensor<?x128xbf16>)
  func.return %y, %res : tensor<?x128xbf16>, tensor<?x128xbf16>
}
