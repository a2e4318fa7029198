// RUN: vllm-opt %s --fuse-norm-quant | filecheck %s
// RUN: vllm-opt %s --fuse-norm-quant | vllm-opt --fuse-norm-quant | filecheck %s
// (A run with `--fuse-norm-quant=raise-rounded-adds=true` once checked the same IR as the
// default run: the option changed nothing and is gone.)

// rms_norm -> every fusable quant scheme: one rewrite, the scheme comes from the quant.
// CHECK-LABEL: func.func @rms_norm_schemes
func.func @rms_norm_schemes(%x: tensor<?x256xbf16>, %w: tensor<256xbf16>, %s: tensor<1xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>, tensor<?x2xf32>, tensor<?x256xf8E4M3FN>, tensor<?x4xf32>, tensor<?x256xi8>, tensor<?x256xi8>, tensor<?x1xf32>, tensor<?x256xf8E4M3FNUZ>, tensor<?x1xf32>) {
  // CHECK-NEXT: %q0 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>
  %y0 = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q0 = vllm.static_scaled_fp8_quant %y0, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  // CHECK-NEXT: %q1, %s1 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  %y1 = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q1, %s1 = vllm.dynamic_per_token_scaled_fp8_quant %y1 : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: %q2, %s2 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) scale_ub(%s : tensor<1xf32>) {epsilon = 3.000000e-07 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  %y2 = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 3.0e-07 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q2, %s2 = vllm.dynamic_per_token_scaled_fp8_quant %y2 scale_ub(%s : tensor<1xf32>) : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: %q3, %s3 = vllm.rms_norm_quant %x {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<dynamic per_group 128>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
  %y3 = vllm.rms_norm %x {epsilon = 1.0e-05 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q3, %s3 = vllm.per_token_group_fp8_quant %y3 {group_size = 128 : i64} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
  // CHECK-NEXT: %q4, %s4 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<dynamic per_group 64 column_major ue8m0 eps 1.000000e-08>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x4xf32>
  %y4 = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q4, %s4 = vllm.per_token_group_fp8_quant %y4 {group_size = 64 : i64, column_major_scales = true, use_ue8m0 = true, eps = 1.0e-08 : f64} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x4xf32>
  // CHECK-NEXT: %q5 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x256xbf16> -> tensor<?x256xi8>
  %y5 = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q5 = vllm.static_scaled_int8_quant %y5, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xi8>
  // CHECK-NEXT: %q6, %s6 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xf32>
  %y6 = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q6, %s6 = vllm.dynamic_per_token_scaled_int8_quant %y6 : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xf32>
  // ROCm gfx94x fp8: the flavour travels in the result type.
  // CHECK-NEXT: %q7, %s7 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FNUZ>, tensor<?x1xf32>
  %y7 = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q7, %s7 = vllm.dynamic_per_token_scaled_fp8_quant %y7 : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FNUZ>, tensor<?x1xf32>
  // CHECK-NOT: vllm.rms_norm {{%|weight}}
  // CHECK-NOT: _quant %y
  // CHECK-NEXT: func.return
  func.return %q0, %q1, %s1, %q2, %s2, %q3, %s3, %q4, %s4, %q5, %q6, %s6, %q7, %s7 : tensor<?x256xf8E4M3FN>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>, tensor<?x2xf32>, tensor<?x256xf8E4M3FN>, tensor<?x4xf32>, tensor<?x256xi8>, tensor<?x256xi8>, tensor<?x1xf32>, tensor<?x256xf8E4M3FNUZ>, tensor<?x1xf32>
}

// Dynamic per-tensor fp8 needs a global max before any row can be quantized: not fused.
// CHECK-LABEL: func.func @dynamic_per_tensor_unfused
func.func @dynamic_per_tensor_unfused(%x: tensor<?x256xf16>, %w: tensor<256xf16>) -> (tensor<?x256xf8E4M3FN>, tensor<1xf32>) {
  // CHECK-NEXT: %y = vllm.rms_norm %x weight(%w : tensor<256xf16>) {epsilon = 1.000000e-05 : f64}
  // CHECK-NEXT: %q, %s = vllm.dynamic_scaled_fp8_quant %y
  %y = vllm.rms_norm %x weight(%w : tensor<256xf16>) {epsilon = 1.0e-05 : f64} : tensor<?x256xf16> -> tensor<?x256xf16>
  %q, %s = vllm.dynamic_scaled_fp8_quant %y : tensor<?x256xf16> -> tensor<?x256xf8E4M3FN>, tensor<1xf32>
  func.return %q, %s : tensor<?x256xf8E4M3FN>, tensor<1xf32>
}

// fused_add_rms_norm -> quant: residual_out is kept and its users rewired.
// CHECK-LABEL: func.func @fused_add_schemes
func.func @fused_add_schemes(%x: tensor<?x256xf16>, %r: tensor<?x256xf16>, %w: tensor<256xf16>, %s: tensor<1xf32>, %e: tensor<f64>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>, tensor<?x2xf32>, tensor<?x256xi8>, tensor<?x256xi8>, tensor<?x1xf32>, tensor<?x256xf16>) {
  // CHECK-NEXT: %q0, %r0 = vllm.fused_add_rms_norm_quant %x, %r weight(%w : tensor<256xf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xf8E4M3FN>, tensor<?x256xf16>
  %y0, %r0 = vllm.fused_add_rms_norm %x, %r weight(%w : tensor<256xf16>) {epsilon = 1.0e-06 : f64} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xf16>, tensor<?x256xf16>
  %q0 = vllm.static_scaled_fp8_quant %y0, %s : tensor<?x256xf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  // CHECK-NEXT: %q1, %r1, %s1 = vllm.fused_add_rms_norm_quant %x, %r0 weight(%w : tensor<256xf16>) scale_ub(%s : tensor<1xf32>) epsilon(%e : tensor<f64>) {scheme = #vllm.quant<dynamic per_token>} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xf8E4M3FN>, tensor<?x256xf16>, tensor<?x1xf32>
  %y1, %r1 = vllm.fused_add_rms_norm %x, %r0 weight(%w : tensor<256xf16>) epsilon(%e : tensor<f64>) : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xf16>, tensor<?x256xf16>
  %q1, %s1 = vllm.dynamic_per_token_scaled_fp8_quant %y1 scale_ub(%s : tensor<1xf32>) : tensor<?x256xf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: %q2, %r2, %s2 = vllm.fused_add_rms_norm_quant %x, %r1 {epsilon = 3.000000e-07 : f64, scheme = #vllm.quant<dynamic per_group 128 column_major>} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xf8E4M3FN>, tensor<?x256xf16>, tensor<?x2xf32>
  %y2, %r2 = vllm.fused_add_rms_norm %x, %r1 {epsilon = 3.0e-07 : f64} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xf16>, tensor<?x256xf16>
  %q2, %s2 = vllm.per_token_group_fp8_quant %y2 {group_size = 128 : i64, column_major_scales = true} : tensor<?x256xf16> -> tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
  // CHECK-NEXT: %q3, %r3 = vllm.fused_add_rms_norm_quant %x, %r2 weight(%w : tensor<256xf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xi8>, tensor<?x256xf16>
  %y3, %r3 = vllm.fused_add_rms_norm %x, %r2 weight(%w : tensor<256xf16>) {epsilon = 1.0e-05 : f64} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xf16>, tensor<?x256xf16>
  %q3 = vllm.static_scaled_int8_quant %y3, %s : tensor<?x256xf16>, tensor<1xf32> -> tensor<?x256xi8>
  // CHECK-NEXT: %q4, %r4, %s4 = vllm.fused_add_rms_norm_quant %x, %r3 weight(%w : tensor<256xf16>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xi8>, tensor<?x256xf16>, tensor<?x1xf32>
  %y4, %r4 = vllm.fused_add_rms_norm %x, %r3 weight(%w : tensor<256xf16>) {epsilon = 1.0e-05 : f64} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xf16>, tensor<?x256xf16>
  %q4, %s4 = vllm.dynamic_per_token_scaled_int8_quant %y4 : tensor<?x256xf16> -> tensor<?x256xi8>, tensor<?x1xf32>
  // CHECK-NOT: vllm.fused_add_rms_norm %
  // CHECK-NOT: _quant %y
  // CHECK-NEXT: func.return %q0, %q1, %s1, %q2, %s2, %q3, %q4, %s4, %r4
  func.return %q0, %q1, %s1, %q2, %s2, %q3, %q4, %s4, %r4 : tensor<?x256xf8E4M3FN>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>, tensor<?x2xf32>, tensor<?x256xi8>, tensor<?x256xi8>, tensor<?x1xf32>, tensor<?x256xf16>
}

// silu_and_mul fuses with every quant but dynamic per-tensor: static and per-group fp8 (as
// vLLM), and per-token fp8 and static int8 too.
// CHECK-LABEL: func.func @silu_and_mul
func.func @silu_and_mul(%g: tensor<?x512xbf16>, %s: tensor<1xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xf8E4M3FNUZ>, tensor<?x2xf32>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xi8>) {
  // CHECK-NEXT: %q0 = vllm.silu_and_mul_quant %g scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x512xbf16> -> tensor<?x256xf8E4M3FN>
  %m0 = vllm.silu_and_mul %g : tensor<?x512xbf16> -> tensor<?x256xbf16>
  %q0 = vllm.static_scaled_fp8_quant %m0, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  // CHECK-NEXT: %q1, %s1 = vllm.silu_and_mul_quant %g {scheme = #vllm.quant<dynamic per_group 128 ue8m0>} : tensor<?x512xbf16> -> tensor<?x256xf8E4M3FNUZ>, tensor<?x2xf32>
  %m1 = vllm.silu_and_mul %g : tensor<?x512xbf16> -> tensor<?x256xbf16>
  %q1, %s1 = vllm.per_token_group_fp8_quant %m1 {group_size = 128 : i64, use_ue8m0 = true} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FNUZ>, tensor<?x2xf32>
  // CHECK-NEXT: %q2, %s2 = vllm.silu_and_mul_quant %g {scheme = #vllm.quant<dynamic per_token>} : tensor<?x512xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  %m2 = vllm.silu_and_mul %g : tensor<?x512xbf16> -> tensor<?x256xbf16>
  %q2, %s2 = vllm.dynamic_per_token_scaled_fp8_quant %m2 : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: %q3 = vllm.silu_and_mul_quant %g scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x512xbf16> -> tensor<?x256xi8>
  %m3 = vllm.silu_and_mul %g : tensor<?x512xbf16> -> tensor<?x256xbf16>
  %q3 = vllm.static_scaled_int8_quant %m3, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xi8>
  // CHECK-NEXT: func.return
  func.return %q0, %q1, %s1, %q2, %s2, %q3 : tensor<?x256xf8E4M3FN>, tensor<?x256xf8E4M3FNUZ>, tensor<?x2xf32>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xi8>
}

// The GELU ops and the two-operand form (gate and up) fuse alike; `up` is carried over.
// CHECK-LABEL: func.func @gelu_and_mul
func.func @gelu_and_mul(%g: tensor<2x?x256xbf16>, %u: tensor<2x?x256xbf16>, %x: tensor<?x512xf16>, %s: tensor<1xf32>) -> (tensor<2x?x256xf8E4M3FN>, tensor<?x256xf8E4M3FN>, tensor<?x2xf32>, tensor<?x256xf8E4M3FN>) {
  // CHECK-NEXT: %q0 = vllm.gelu_tanh_and_mul_quant %g up(%u : tensor<2x?x256xbf16>) scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<2x?x256xbf16> -> tensor<2x?x256xf8E4M3FN>
  %m0 = vllm.gelu_tanh_and_mul %g up(%u : tensor<2x?x256xbf16>) : tensor<2x?x256xbf16> -> tensor<2x?x256xbf16>
  %q0 = vllm.static_scaled_fp8_quant %m0, %s : tensor<2x?x256xbf16>, tensor<1xf32> -> tensor<2x?x256xf8E4M3FN>
  // CHECK-NEXT: %q1, %s1 = vllm.gelu_and_mul_quant %x {scheme = #vllm.quant<dynamic per_group 128>} : tensor<?x512xf16> -> tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
  %m1 = vllm.gelu_and_mul %x : tensor<?x512xf16> -> tensor<?x256xf16>
  %q1, %s1 = vllm.per_token_group_fp8_quant %m1 {group_size = 128 : i64} : tensor<?x256xf16> -> tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
  // Dynamic per-tensor needs a global max first: not fused.
  // CHECK-NEXT: %m2 = vllm.gelu_and_mul %x
  // CHECK-NEXT: %q2, %s2 = vllm.dynamic_scaled_fp8_quant %m2
  %m2 = vllm.gelu_and_mul %x : tensor<?x512xf16> -> tensor<?x256xf16>
  %q2, %s2 = vllm.dynamic_scaled_fp8_quant %m2 : tensor<?x256xf16> -> tensor<?x256xf8E4M3FN>, tensor<1xf32>
  // CHECK-NEXT: func.return
  func.return %q0, %q1, %s1, %q2 : tensor<2x?x256xf8E4M3FN>, tensor<?x256xf8E4M3FN>, tensor<?x2xf32>, tensor<?x256xf8E4M3FN>
}

// A view that keeps the last dimension does not block fusion: the fused op works on the
// norm's shape, the view is re-applied to q, and per-token scales [T, 1] stay valid.
// CHECK-LABEL: func.func @view_kept
func.func @view_kept(%x: tensor<2x?x256xbf16>, %w: tensor<256xbf16>, %s: tensor<1xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>) {
  // CHECK-NEXT: %[[Q:.*]], %s1 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<2x?x256xbf16> -> tensor<2x?x256xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: %q = torch.call "aten::view"(%[[Q]]) [#torch.operand<0>, [-1 : i64, 256 : i64]] : (tensor<2x?x256xf8E4M3FN>) -> tensor<?x256xf8E4M3FN>
  %y = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-06 : f64} : tensor<2x?x256xbf16> -> tensor<2x?x256xbf16>
  %v = torch.call "aten::view"(%y) [#torch.operand<0>, [-1 : i64, 256 : i64]] : (tensor<2x?x256xbf16>) -> tensor<?x256xbf16>
  %q, %s1 = vllm.dynamic_per_token_scaled_fp8_quant %v : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  // Two views in a row, then a static quant; the scale is defined after the norm.
  // CHECK-NEXT: %s2 = torch.get_attr "scale2" : tensor<1xf32>
  // CHECK-NEXT: %[[Q2:.*]] = vllm.rms_norm_quant %x scale(%s2 : tensor<1xf32>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<2x?x256xbf16> -> tensor<2x?x256xf8E4M3FN>
  // CHECK-NEXT: %[[U:.*]] = torch.call "aten::unsqueeze.default"(%[[Q2]]) [#torch.operand<0>, 0 : i64] : (tensor<2x?x256xf8E4M3FN>) -> tensor<1x2x?x256xf8E4M3FN>
  // CHECK-NEXT: %q2 = torch.call "aten::reshape.default"(%[[U]]) [#torch.operand<0>, [-1 : i64, 256 : i64]] : (tensor<1x2x?x256xf8E4M3FN>) -> tensor<?x256xf8E4M3FN>
  // CHECK-NOT: bf16>) -> tensor<{{.*}}xbf16>
  // CHECK-NEXT: func.return %q, %s1, %q2
  %y2 = vllm.rms_norm %x {epsilon = 1.0e-06 : f64} : tensor<2x?x256xbf16> -> tensor<2x?x256xbf16>
  %u = torch.call "aten::unsqueeze.default"(%y2) [#torch.operand<0>, 0 : i64] : (tensor<2x?x256xbf16>) -> tensor<1x2x?x256xbf16>
  %v2 = torch.call "aten::reshape.default"(%u) [#torch.operand<0>, [-1 : i64, 256 : i64]] : (tensor<1x2x?x256xbf16>) -> tensor<?x256xbf16>
  %s2 = torch.get_attr "scale2" : tensor<1xf32>
  %q2 = vllm.static_scaled_fp8_quant %v2, %s2 : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  func.return %q, %s1, %q2 : tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>
}

// A view with a runtime size operand (dynamic shapes): re-applied with the same operands.
// CHECK-LABEL: func.func @view_dynamic_size
func.func @view_dynamic_size(%x: tensor<?x256xf16>, %s: tensor<1xf32>) -> tensor<1x?x256xi8> {
  // CHECK-NEXT: %n = torch.call "aten::sym_size.int"(%x)
  // CHECK-NEXT: %[[Q:.*]] = vllm.rms_norm_quant %x scale(%s : tensor<1xf32>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x256xf16> -> tensor<?x256xi8>
  // CHECK-NEXT: %q = torch.call "aten::view"(%[[Q]], %n) [#torch.operand<0>, [1 : i64, #torch.operand<1>, 256 : i64]] : (tensor<?x256xi8>, i64) -> tensor<1x?x256xi8>
  // CHECK-NEXT: func.return %q
  %y = vllm.rms_norm %x {epsilon = 1.0e-05 : f64} : tensor<?x256xf16> -> tensor<?x256xf16>
  %n = torch.call "aten::sym_size.int"(%x) [#torch.operand<0>, 0 : i64] : (tensor<?x256xf16>) -> i64
  %v = torch.call "aten::view"(%y, %n) [#torch.operand<0>, [1 : i64, #torch.operand<1>, 256 : i64]] : (tensor<?x256xf16>, i64) -> tensor<1x?x256xf16>
  %q = vllm.static_scaled_int8_quant %v, %s : tensor<1x?x256xf16>, tensor<1xf32> -> tensor<1x?x256xi8>
  func.return %q : tensor<1x?x256xi8>
}

// A view that changes the last dimension blocks fusion.
// CHECK-LABEL: func.func @view_blocks
func.func @view_blocks(%x: tensor<?x256xbf16>, %w: tensor<256xbf16>) -> (tensor<?x128xf8E4M3FN>, tensor<?x1xf32>) {
  // CHECK-NEXT: %y = vllm.rms_norm
  // CHECK-NEXT: %v = torch.call "aten::view"
  // CHECK-NEXT: %q, %s = vllm.dynamic_per_token_scaled_fp8_quant %v
  %y = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %v = torch.call "aten::view"(%y) [#torch.operand<0>, [-1 : i64, 128 : i64]] : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %q, %s = vllm.dynamic_per_token_scaled_fp8_quant %v : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
  func.return %q, %s : tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
}

// Fan-out: a user besides the quant keeps everything unfused (see the pass docstring) ...
// CHECK-LABEL: func.func @fan_out_other_user
func.func @fan_out_other_user(%x: tensor<?x256xbf16>, %w: tensor<256xbf16>, %s: tensor<1xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xbf16>) {
  // CHECK-NEXT: %y = vllm.rms_norm
  // CHECK-NEXT: %q = vllm.static_scaled_fp8_quant %y, %s
  // CHECK-NEXT: %o = torch.call "aten::relu.default"(%y)
  %y = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q = vllm.static_scaled_fp8_quant %y, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  %o = torch.call "aten::relu.default"(%y) [#torch.operand<0>] : (tensor<?x256xbf16>) -> tensor<?x256xbf16>
  func.return %q, %o : tensor<?x256xf8E4M3FN>, tensor<?x256xbf16>
}

// ... also when the other user is an unfusable quant; but when every user is a fusable
// quant, each gets its own fused op and the norm disappears.
// CHECK-LABEL: func.func @fan_out_quants
func.func @fan_out_quants(%x: tensor<?x256xbf16>, %w: tensor<256xbf16>, %s: tensor<1xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xi8>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>, tensor<1xf32>) {
  // CHECK-NEXT: %q0 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<static per_tensor>}
  // CHECK-NEXT: %q1, %s1 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xf32>
  %y = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q0 = vllm.static_scaled_fp8_quant %y, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  %q1, %s1 = vllm.dynamic_per_token_scaled_int8_quant %y : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xf32>
  // CHECK-NEXT: %y2 = vllm.rms_norm
  // CHECK-NEXT: %q2 = vllm.static_scaled_fp8_quant %y2, %s
  // CHECK-NEXT: %q3, %s3 = vllm.dynamic_scaled_fp8_quant %y2
  %y2 = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q2 = vllm.static_scaled_fp8_quant %y2, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  %q3, %s3 = vllm.dynamic_scaled_fp8_quant %y2 : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<1xf32>
  // CHECK-NEXT: func.return
  func.return %q0, %q1, %s1, %q2, %s3 : tensor<?x256xf8E4M3FN>, tensor<?x256xi8>, tensor<?x1xf32>, tensor<?x256xf8E4M3FN>, tensor<1xf32>
}

// fused_add_rms_norm whose quant scale is defined after the norm: the fused op goes at the
// quant, which is fine while every user of residual_out comes later ...
// CHECK-LABEL: func.func @fused_add_placement
func.func @fused_add_placement(%x: tensor<?x256xbf16>, %r: tensor<?x256xbf16>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xbf16>, tensor<?x256xf8E4M3FN>, tensor<?x256xbf16>) {
  // CHECK-NEXT: %s = torch.get_attr "scale" : tensor<1xf32>
  // CHECK-NEXT: %q, %ro = vllm.fused_add_rms_norm_quant %x, %r scale(%s : tensor<1xf32>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<static per_tensor>}
  // CHECK-NEXT: %n = torch.call "aten::neg.default"(%ro)
  %y, %ro = vllm.fused_add_rms_norm %x, %r {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16>, tensor<?x256xbf16> -> tensor<?x256xbf16>, tensor<?x256xbf16>
  %s = torch.get_attr "scale" : tensor<1xf32>
  %q = vllm.static_scaled_fp8_quant %y, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  %n = torch.call "aten::neg.default"(%ro) [#torch.operand<0>] : (tensor<?x256xbf16>) -> tensor<?x256xbf16>
  // ... but not when residual_out is used between the norm and a late-defined scale.
  // CHECK-NEXT: %y2, %ro2 = vllm.fused_add_rms_norm %x, %r
  // CHECK-NEXT: %n2 = torch.call "aten::neg.default"(%ro2)
  // CHECK-NEXT: %s2 = torch.get_attr "scale" : tensor<1xf32>
  // CHECK-NEXT: %q2 = vllm.static_scaled_fp8_quant %y2, %s2
  %y2, %ro2 = vllm.fused_add_rms_norm %x, %r {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16>, tensor<?x256xbf16> -> tensor<?x256xbf16>, tensor<?x256xbf16>
  %n2 = torch.call "aten::neg.default"(%ro2) [#torch.operand<0>] : (tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %s2 = torch.get_attr "scale" : tensor<1xf32>
  %q2 = vllm.static_scaled_fp8_quant %y2, %s2 : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  // CHECK-NEXT: func.return
  func.return %q, %n, %q2, %n2 : tensor<?x256xf8E4M3FN>, tensor<?x256xbf16>, tensor<?x256xf8E4M3FN>, tensor<?x256xbf16>
}

// fused_add_rms_norm with two quants of its output: two fused ops, the first one takes
// over residual_out.
// CHECK-LABEL: func.func @fused_add_two_quants
func.func @fused_add_two_quants(%x: tensor<?x256xf16>, %r: tensor<?x256xf16>, %s: tensor<1xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xi8>, tensor<?x1xf32>, tensor<?x256xf16>) {
  // CHECK-NEXT: %q0, %ro = vllm.fused_add_rms_norm_quant %x, %r scale(%s : tensor<1xf32>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor>}
  // CHECK-NEXT: %q1, %{{.*}}, %s1 = vllm.fused_add_rms_norm_quant %x, %r {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<dynamic per_token>}
  // CHECK-NEXT: func.return %q0, %q1, %s1, %ro
  %y, %ro = vllm.fused_add_rms_norm %x, %r {epsilon = 1.0e-05 : f64} : tensor<?x256xf16>, tensor<?x256xf16> -> tensor<?x256xf16>, tensor<?x256xf16>
  %q0 = vllm.static_scaled_fp8_quant %y, %s : tensor<?x256xf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  %q1, %s1 = vllm.dynamic_per_token_scaled_int8_quant %y : tensor<?x256xf16> -> tensor<?x256xi8>, tensor<?x1xf32>
  func.return %q0, %q1, %s1, %ro : tensor<?x256xf8E4M3FN>, tensor<?x256xi8>, tensor<?x1xf32>, tensor<?x256xf16>
}

// A weight of another dtype than x (Gemma's f32 `1 + w` on bf16 x) fuses: the fused op is
// the composition for any weight dtype. The rounded_sum variant travels into the fused op.
// CHECK-LABEL: func.func @mixed_weight_fuses
func.func @mixed_weight_fuses(%x: tensor<?x256xbf16>, %r: tensor<?x256xbf16>, %wf: tensor<256xf32>, %s: tensor<1xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xbf16>) {
  // CHECK-NEXT: %q0 = vllm.rms_norm_quant %x weight(%wf : tensor<256xf32>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>
  %y0 = vllm.rms_norm %x weight(%wf : tensor<256xf32>) {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q0 = vllm.static_scaled_fp8_quant %y0, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  // CHECK-NEXT: %q1, %r1, %s1 = vllm.fused_add_rms_norm_quant %x, %r weight(%wf : tensor<256xf32>) {epsilon = 1.000000e-06 : f64, rounded_sum, scheme = #vllm.quant<dynamic per_token>} : tensor<?x256xbf16>, tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x256xbf16>, tensor<?x1xf32>
  %y1, %r1 = vllm.fused_add_rms_norm %x, %r weight(%wf : tensor<256xf32>) {epsilon = 1.0e-06 : f64, rounded_sum} : tensor<?x256xbf16>, tensor<?x256xbf16> -> tensor<?x256xbf16>, tensor<?x256xbf16>
  %q1, %s1 = vllm.dynamic_per_token_scaled_fp8_quant %y1 : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: func.return %q0, %q1, %s1, %r1
  func.return %q0, %q1, %s1, %r1 : tensor<?x256xf8E4M3FN>, tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xbf16>
}

// Guard: variance_size, which the fused ops cannot express: no fusion.
// CHECK-LABEL: func.func @guards
func.func @guards(%x: tensor<?x256xbf16>, %s: tensor<1xf32>) -> tensor<?x256xf8E4M3FN> {
  // CHECK-NEXT: %y2 = vllm.rms_norm %x {epsilon = 1.000000e-06 : f64, variance_size = 128 : i64}
  // CHECK-NEXT: %q2 = vllm.static_scaled_fp8_quant %y2, %s
  %y2 = vllm.rms_norm %x {epsilon = 1.0e-06 : f64, variance_size = 128 : i64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q2 = vllm.static_scaled_fp8_quant %y2, %s : tensor<?x256xbf16>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  // CHECK-NEXT: func.return
  func.return %q2 : tensor<?x256xf8E4M3FN>
}

// Runtime epsilon (as torch.compile(dynamic=True) passes it) is carried as an operand.
// CHECK-LABEL: func.func @runtime_epsilon
func.func @runtime_epsilon(%x: tensor<?x256xf32>, %w: tensor<256xf32>, %e: tensor<f64>) -> (tensor<?x256xf8E4M3FN>, tensor<?x2xf32>) {
  // CHECK-NEXT: %q, %s = vllm.rms_norm_quant %x weight(%w : tensor<256xf32>) epsilon(%e : tensor<f64>) {scheme = #vllm.quant<dynamic per_group 128>} : tensor<?x256xf32> -> tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
  // CHECK-NEXT: func.return %q, %s
  %y = vllm.rms_norm %x weight(%w : tensor<256xf32>) epsilon(%e : tensor<f64>) : tensor<?x256xf32> -> tensor<?x256xf32>
  %q, %s = vllm.per_token_group_fp8_quant %y {group_size = 128 : i64} : tensor<?x256xf32> -> tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
  func.return %q, %s : tensor<?x256xf8E4M3FN>, tensor<?x2xf32>
}

// An f32 residual add feeding rms_norm and the residual stream is raised to
// fused_add_rms_norm (other users of the sum take residual_out; bit-exact for f32), then
// fused with the quant.
// CHECK-LABEL: func.func @residual_add
func.func @residual_add(%x: tensor<?x256xf32>, %r: tensor<?x256xf32>, %w: tensor<256xf32>, %s: tensor<1xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xf32>, tensor<?x256xf32>) {
  // CHECK-NEXT: %q, %a = vllm.fused_add_rms_norm_quant %x, %r weight(%w : tensor<256xf32>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x256xf32>, tensor<?x256xf32> -> tensor<?x256xf8E4M3FN>, tensor<?x256xf32>
  %a = torch.call "aten::add.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] kwargs {alpha = 1 : i64} : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %y = vllm.rms_norm %a weight(%w : tensor<256xf32>) {epsilon = 1.0e-05 : f64} : tensor<?x256xf32> -> tensor<?x256xf32>
  %q = vllm.static_scaled_fp8_quant %y, %s : tensor<?x256xf32>, tensor<1xf32> -> tensor<?x256xf8E4M3FN>
  // Without a quant after it the add + norm still becomes fused_add_rms_norm; a user of
  // the sum placed before the norm is served by placing the fused op at the add.
  // CHECK-NEXT: %y2, %a2 = vllm.fused_add_rms_norm %x, %a weight(%w : tensor<256xf32>) {epsilon = 1.000000e-05 : f64} : tensor<?x256xf32>, tensor<?x256xf32> -> tensor<?x256xf32>, tensor<?x256xf32>
  // CHECK-NEXT: %n = torch.call "aten::neg.default"(%a2)
  %a2 = torch.call "aten::add.Tensor"(%x, %a) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %n = torch.call "aten::neg.default"(%a2) [#torch.operand<0>] : (tensor<?x256xf32>) -> tensor<?x256xf32>
  %y2 = vllm.rms_norm %a2 weight(%w : tensor<256xf32>) {epsilon = 1.0e-05 : f64} : tensor<?x256xf32> -> tensor<?x256xf32>
  // CHECK-NOT: aten::add
  // CHECK-NOT: vllm.rms_norm
  // CHECK-NOT: vllm.static_scaled_fp8_quant
  // CHECK-NEXT: func.return %q, %y2, %n
  func.return %q, %y2, %n : tensor<?x256xf8E4M3FN>, tensor<?x256xf32>, tensor<?x256xf32>
}

// An f16/bf16 add is raised as the rounded_sum variant, which normalises the sum as the
// add rounded it (exact), then fused with the quant.
// CHECK-LABEL: func.func @residual_add_rounded
func.func @residual_add_rounded(%x: tensor<?x256xbf16>, %r: tensor<?x256xbf16>, %w: tensor<256xbf16>) -> (tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xbf16>) {
  // CHECK-NEXT: %q, %a, %s = vllm.fused_add_rms_norm_quant %x, %r weight(%w : tensor<256xbf16>) {epsilon = 1.000000e-06 : f64, rounded_sum, scheme = #vllm.quant<dynamic per_token>} : tensor<?x256xbf16>, tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x256xbf16>, tensor<?x1xf32>
  // CHECK-NEXT: func.return %q, %s, %a
  %a = torch.call "aten::add.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x256xbf16>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %y = vllm.rms_norm %a weight(%w : tensor<256xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q, %s = vllm.dynamic_per_token_scaled_fp8_quant %y : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x1xf32>
  func.return %q, %s, %a : tensor<?x256xf8E4M3FN>, tensor<?x1xf32>, tensor<?x256xbf16>
}

// Adds that are not a plain residual add stay: alpha 2, a broadcast.
// CHECK-LABEL: func.func @not_residual_add
func.func @not_residual_add(%x: tensor<?x256xbf16>, %r: tensor<?x256xbf16>, %b: tensor<256xbf16>) -> (tensor<?x256xbf16>, tensor<?x256xbf16>) {
  // CHECK-NEXT: %a = torch.call "aten::add.Tensor"
  // CHECK-NEXT: %y = vllm.rms_norm %a
  // CHECK-NEXT: %a1 = torch.call "aten::add.Tensor"
  // CHECK-NEXT: %y1 = vllm.rms_norm %a1
  %a = torch.call "aten::add.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] kwargs {alpha = 2 : i64} : (tensor<?x256xbf16>, tensor<?x256xbf16>) -> tensor<?x256xbf16>
  %y = vllm.rms_norm %a {epsilon = 1.0e-05 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %a1 = torch.call "aten::add.Tensor"(%x, %b) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x256xbf16>, tensor<256xbf16>) -> tensor<?x256xbf16>
  %y1 = vllm.rms_norm %a1 {epsilon = 1.0e-05 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  func.return %y, %y1 : tensor<?x256xbf16>, tensor<?x256xbf16>
}

// An f32 add is not raised into a norm with variance_size (fused_add_rms_norm has none), nor
// when a user of the sum precedes the norm and the weight is only defined after the add.
// CHECK-LABEL: func.func @not_raised_f32
func.func @not_raised_f32(%x: tensor<?x256xf32>, %r: tensor<?x256xf32>) -> (tensor<?x256xf32>, tensor<?x256xf32>, tensor<?x256xf32>) {
  // CHECK-NEXT: %a = torch.call "aten::add.Tensor"
  // CHECK-NEXT: %y = vllm.rms_norm %a {epsilon = 1.000000e-05 : f64, variance_size = 128 : i64}
  // CHECK-NEXT: %a1 = torch.call "aten::add.Tensor"
  // CHECK-NEXT: %n = torch.call "aten::neg.default"(%a1)
  // CHECK-NEXT: %w = torch.get_attr "norm.weight" : tensor<256xf32>
  // CHECK-NEXT: %y1 = vllm.rms_norm %a1 weight(%w : tensor<256xf32>)
  %a = torch.call "aten::add.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %y = vllm.rms_norm %a {epsilon = 1.0e-05 : f64, variance_size = 128 : i64} : tensor<?x256xf32> -> tensor<?x256xf32>
  %a1 = torch.call "aten::add.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %n = torch.call "aten::neg.default"(%a1) [#torch.operand<0>] : (tensor<?x256xf32>) -> tensor<?x256xf32>
  %w = torch.get_attr "norm.weight" : tensor<256xf32>
  %y1 = vllm.rms_norm %a1 weight(%w : tensor<256xf32>) {epsilon = 1.0e-05 : f64} : tensor<?x256xf32> -> tensor<?x256xf32>
  func.return %y, %y1, %n : tensor<?x256xf32>, tensor<?x256xf32>, tensor<?x256xf32>
}

// Quant variants and zero points are carried into the fused op (docs/OPS.md "Variants"):
// the unfused `variant` becomes the scheme's keywords, `zero_point` an operand. A per-token
// zero point is shaped like the quant's rows: not through a view that reshapes them.
// CHECK-LABEL: func.func @variants
func.func @variants(%x: tensor<?x256xbf16>, %r: tensor<?x256xbf16>, %w: tensor<256xbf16>, %s: tensor<1xbf16>, %z: tensor<1xbf16>, %zt: tensor<?x1xbf16>, %zv: tensor<?x2x1xbf16>) -> (tensor<?x256xf8E4M3FN>, tensor<?x256xi8>, tensor<?x256xbf16>, tensor<?x1xbf16>, tensor<?x128xf8E4M3FN>, tensor<?x2xf32>, tensor<?x2x128xi8>, tensor<?x1xf32>) {
  // CHECK-NEXT: %q0 = vllm.rms_norm_quant %x weight(%w : tensor<256xbf16>) scale(%s : tensor<1xbf16>) zero_point(%z : tensor<1xbf16>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor div quotient bf16>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>
  %y0 = vllm.rms_norm %x weight(%w : tensor<256xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %q0 = vllm.static_scaled_fp8_quant %y0, %s zero_point(%z : tensor<1xbf16>) {variant = #vllm.quant_variant<div quotient bf16>} : tensor<?x256xbf16>, tensor<1xbf16> -> tensor<?x256xf8E4M3FN>
  // CHECK-NEXT: %q1, %ro, %s1 = vllm.fused_add_rms_norm_quant %x, %r weight(%w : tensor<256xbf16>) zero_point(%zt : tensor<?x1xbf16>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_token quotient bf16 scale bf16 zero_eps 7.812500e-03 range 1.275000e+02>} : tensor<?x256xbf16>, tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x256xbf16>, tensor<?x1xbf16>
  %y1, %ro = vllm.fused_add_rms_norm %x, %r weight(%w : tensor<256xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x256xbf16>, tensor<?x256xbf16> -> tensor<?x256xbf16>, tensor<?x256xbf16>
  %q1, %s1 = vllm.dynamic_per_token_scaled_int8_quant %y1 zero_point(%zt : tensor<?x1xbf16>) {variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 7.8125e-03 range 127.5>} : tensor<?x256xbf16> -> tensor<?x256xi8>, tensor<?x1xbf16>
  // CHECK-NEXT: %q2, %s2 = vllm.silu_and_mul_quant %x {scheme = #vllm.quant<dynamic per_group 64 ue8m0 min_scale>} : tensor<?x256xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x2xf32>
  %y2 = vllm.silu_and_mul %x : tensor<?x256xbf16> -> tensor<?x128xbf16>
  %q2, %s2 = vllm.per_token_group_fp8_quant %y2 {group_size = 64 : i64, use_ue8m0 = true, variant = #vllm.quant_variant<min_scale>} : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x2xf32>
  // CHECK-NEXT: %y3 = vllm.rms_norm %x
  // CHECK-NEXT: %v3 = torch.call "aten::view.default"(%y3)
  // CHECK-NEXT: %q3, %s3 = vllm.dynamic_per_token_scaled_int8_quant %v3 zero_point(%zv : tensor<?x2x1xbf16>)
  %y3 = vllm.rms_norm %x {epsilon = 1.0e-05 : f64} : tensor<?x256xbf16> -> tensor<?x256xbf16>
  %v3 = torch.call "aten::view.default"(%y3) [#torch.operand<0>, [-1 : i64, 2 : i64, 128 : i64]] : (tensor<?x256xbf16>) -> tensor<?x2x128xbf16>
  %q3, %s3 = vllm.dynamic_per_token_scaled_int8_quant %v3 zero_point(%zv : tensor<?x2x1xbf16>) {variant = #vllm.quant_variant<zero_eps 1.0e-06>} : tensor<?x2x128xbf16> -> tensor<?x2x128xi8>, tensor<?x1xf32>
  func.return %q0, %q1, %ro, %s1, %q2, %s2, %q3, %s3 : tensor<?x256xf8E4M3FN>, tensor<?x256xi8>, tensor<?x256xbf16>, tensor<?x1xbf16>, tensor<?x128xf8E4M3FN>, tensor<?x2xf32>, tensor<?x2x128xi8>, tensor<?x1xf32>
}
