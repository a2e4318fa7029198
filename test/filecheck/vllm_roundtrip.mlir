// RUN: vllm-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s

// Every vllm op in its custom syntax, with optional operands present and absent.

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<?x4096xbf16>, %r: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %wf: tensor<4096xf32>, %e: tensor<f64>) -> (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>) {
  // CHECK-NEXT: %y = vllm.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  %y = vllm.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  // CHECK-NEXT: %y1 = vllm.rms_norm %x {epsilon = 3.000000e-07 : f64, variance_size = 128 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  %y1 = vllm.rms_norm %x {epsilon = 3.0e-07 : f64, variance_size = 128 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  // CHECK-NEXT: %y2 = vllm.rms_norm %x weight(%wf : tensor<4096xf32>) epsilon(%e : tensor<f64>) : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  %y2 = vllm.rms_norm %x weight(%wf : tensor<4096xf32>) epsilon(%e : tensor<f64>) : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  // CHECK-NEXT: %o, %ro = vllm.fused_add_rms_norm %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-06 : f64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  %o, %ro = vllm.fused_add_rms_norm %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  // The rounded_sum variant (the norm reads the sum rounded to bf16), with a Gemma f32 weight.
  // CHECK-NEXT: %o1, %ro1 = vllm.fused_add_rms_norm %x, %r weight(%wf : tensor<4096xf32>) epsilon(%e : tensor<f64>) {rounded_sum} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  %o1, %ro1 = vllm.fused_add_rms_norm %x, %r weight(%wf : tensor<4096xf32>) epsilon(%e : tensor<f64>) {rounded_sum} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  func.return %y, %y1, %y2, %o, %ro : tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>
}

// CHECK-LABEL: func.func @quants
func.func @quants(%x: tensor<?x4096xf16>, %s: tensor<1xf32>) {
  // CHECK-NEXT: %q0 = vllm.static_scaled_fp8_quant %x, %s : tensor<?x4096xf16>, tensor<1xf32> -> tensor<?x4096xf8E4M3FN>
  %q0 = vllm.static_scaled_fp8_quant %x, %s : tensor<?x4096xf16>, tensor<1xf32> -> tensor<?x4096xf8E4M3FN>
  // CHECK-NEXT: %q1, %s1 = vllm.dynamic_scaled_fp8_quant %x : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FNUZ>, tensor<1xf32>
  %q1, %s1 = vllm.dynamic_scaled_fp8_quant %x : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FNUZ>, tensor<1xf32>
  // CHECK-NEXT: %q2, %s2 = vllm.dynamic_per_token_scaled_fp8_quant %x scale_ub(%s : tensor<1xf32>) : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x1xf32>
  %q2, %s2 = vllm.dynamic_per_token_scaled_fp8_quant %x scale_ub(%s : tensor<1xf32>) : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: %q3, %s3 = vllm.dynamic_per_token_scaled_fp8_quant %x : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x1xf32>
  %q3, %s3 = vllm.dynamic_per_token_scaled_fp8_quant %x : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: %q4, %s4 = vllm.per_token_group_fp8_quant %x {group_size = 128 : i64, column_major_scales = true, use_ue8m0 = true} : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x32xf32>
  %q4, %s4 = vllm.per_token_group_fp8_quant %x {group_size = 128 : i64, column_major_scales = true, use_ue8m0 = true} : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x32xf32>
  // CHECK-NEXT: %q5, %s5 = vllm.per_token_group_fp8_quant %x {group_size = 64 : i64, eps = 1.000000e-08 : f64} : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FNUZ>, tensor<?x64xf32>
  %q5, %s5 = vllm.per_token_group_fp8_quant %x {group_size = 64 : i64, eps = 1.0e-08 : f64} : tensor<?x4096xf16> -> tensor<?x4096xf8E4M3FNUZ>, tensor<?x64xf32>
  // CHECK-NEXT: %q6 = vllm.static_scaled_int8_quant %x, %s : tensor<?x4096xf16>, tensor<1xf32> -> tensor<?x4096xi8>
  %q6 = vllm.static_scaled_int8_quant %x, %s : tensor<?x4096xf16>, tensor<1xf32> -> tensor<?x4096xi8>
  // CHECK-NEXT: %q7, %s7 = vllm.dynamic_per_token_scaled_int8_quant %x : tensor<?x4096xf16> -> tensor<?x4096xi8>, tensor<?x1xf32>
  %q7, %s7 = vllm.dynamic_per_token_scaled_int8_quant %x : tensor<?x4096xf16> -> tensor<?x4096xi8>, tensor<?x1xf32>
  func.return
}

// CHECK-LABEL: func.func @activations
func.func @activations(%g: tensor<7x8192xf32>, %a: tensor<2x?x4096xbf16>, %b: tensor<2x?x4096xbf16>) -> tensor<7x4096xf32> {
  // CHECK-NEXT: %m = vllm.silu_and_mul %g : tensor<7x8192xf32> -> tensor<7x4096xf32>
  %m = vllm.silu_and_mul %g : tensor<7x8192xf32> -> tensor<7x4096xf32>
  // CHECK-NEXT: %n = vllm.silu_and_mul %a up(%b : tensor<2x?x4096xbf16>) : tensor<2x?x4096xbf16> -> tensor<2x?x4096xbf16>
  %n = vllm.silu_and_mul %a up(%b : tensor<2x?x4096xbf16>) : tensor<2x?x4096xbf16> -> tensor<2x?x4096xbf16>
  // CHECK-NEXT: %o = vllm.gelu_and_mul %g : tensor<7x8192xf32> -> tensor<7x4096xf32>
  %o = vllm.gelu_and_mul %g : tensor<7x8192xf32> -> tensor<7x4096xf32>
  // CHECK-NEXT: %p = vllm.gelu_tanh_and_mul %a up(%b : tensor<2x?x4096xbf16>) : tensor<2x?x4096xbf16> -> tensor<2x?x4096xbf16>
  %p = vllm.gelu_tanh_and_mul %a up(%b : tensor<2x?x4096xbf16>) : tensor<2x?x4096xbf16> -> tensor<2x?x4096xbf16>
  func.return %m : tensor<7x4096xf32>
}

// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<?x4096xbf16>, %r: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %wf: tensor<4096xf32>, %s: tensor<1xf32>, %e: tensor<f64>, %g: tensor<?x8192xbf16>) {
  // CHECK-NEXT: %a = vllm.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
  %a = vllm.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
  // CHECK-NEXT: %b, %bs = vllm.rms_norm_quant %x scale_ub(%s : tensor<1xf32>) epsilon(%e : tensor<f64>) {scheme = #vllm.quant<dynamic per_token>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FNUZ>, tensor<?x1xf32>
  %b, %bs = vllm.rms_norm_quant %x scale_ub(%s : tensor<1xf32>) epsilon(%e : tensor<f64>) {scheme = #vllm.quant<dynamic per_token>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FNUZ>, tensor<?x1xf32>
  // CHECK-NEXT: %c, %cs = vllm.rms_norm_quant %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_group 128 column_major ue8m0>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x32xf32>
  %c, %cs = vllm.rms_norm_quant %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<dynamic per_group 128 column_major ue8m0>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x32xf32>
  // CHECK-NEXT: %d = vllm.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16> -> tensor<?x4096xi8>
  %d = vllm.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16> -> tensor<?x4096xi8>
  // CHECK-NEXT: %f, %fr, %fs = vllm.fused_add_rms_norm_quant %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 3.000000e-07 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xi8>, tensor<?x4096xbf16>, tensor<?x1xf32>
  %f, %fr, %fs = vllm.fused_add_rms_norm_quant %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 3.0e-07 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xi8>, tensor<?x4096xbf16>, tensor<?x1xf32>
  // CHECK-NEXT: %h, %hr = vllm.fused_add_rms_norm_quant %x, %r scale(%s : tensor<1xf32>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x4096xbf16>
  %h, %hr = vllm.fused_add_rms_norm_quant %x, %r scale(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x4096xbf16>
  // CHECK-NEXT: %h1, %hr1 = vllm.fused_add_rms_norm_quant %x, %r weight(%wf : tensor<4096xf32>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-05 : f64, rounded_sum, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x4096xbf16>
  %h1, %hr1 = vllm.fused_add_rms_norm_quant %x, %r weight(%wf : tensor<4096xf32>) scale(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, rounded_sum, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x4096xbf16>
  // CHECK-NEXT: %i = vllm.silu_and_mul_quant %g scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x8192xbf16> -> tensor<?x4096xf8E4M3FN>
  %i = vllm.silu_and_mul_quant %g scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x8192xbf16> -> tensor<?x4096xf8E4M3FN>
  // CHECK-NEXT: %j, %js = vllm.silu_and_mul_quant %g {scheme = #vllm.quant<dynamic per_group 64 eps 1.000000e-08>} : tensor<?x8192xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x64xf32>
  %j, %js = vllm.silu_and_mul_quant %g {scheme = #vllm.quant<dynamic per_group 64 eps 1.0e-08>} : tensor<?x8192xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x64xf32>
  // CHECK-NEXT: %k, %ks = vllm.gelu_tanh_and_mul_quant %x up(%x : tensor<?x4096xbf16>) scale_ub(%s : tensor<1xf32>) {scheme = #vllm.quant<dynamic per_token>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x1xf32>
  %k, %ks = vllm.gelu_tanh_and_mul_quant %x up(%x : tensor<?x4096xbf16>) scale_ub(%s : tensor<1xf32>) {scheme = #vllm.quant<dynamic per_token>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: %l = vllm.gelu_and_mul_quant %g scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x8192xbf16> -> tensor<?x4096xi8>
  %l = vllm.gelu_and_mul_quant %g scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x8192xbf16> -> tensor<?x4096xi8>
  func.return
}
