// RUN: vllm-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s

// Quant variants (docs/OPS.md "Variants"): the `variant` property and `zero_point` operand of
// the unfused quants, and the variant keywords of `#vllm.quant` on the fused ops.

// CHECK-LABEL: func.func @unfused
func.func @unfused(%x: tensor<?x64xbf16>, %y: tensor<2x?x64xbf16>, %s: tensor<1xbf16>, %zp: tensor<1xbf16>, %zt: tensor<2x?x1xbf16>, %zg: tensor<2x?x2xbf16>) {
  // CHECK-NEXT: %q0 = vllm.static_scaled_fp8_quant %x, %s zero_point(%zp : tensor<1xbf16>) {variant = #vllm.quant_variant<div quotient bf16>} : tensor<?x64xbf16>, tensor<1xbf16> -> tensor<?x64xf8E4M3FN>
  %q0 = vllm.static_scaled_fp8_quant %x, %s zero_point(%zp : tensor<1xbf16>) {variant = #vllm.quant_variant<div quotient bf16>} : tensor<?x64xbf16>, tensor<1xbf16> -> tensor<?x64xf8E4M3FN>
  // CHECK-NEXT: %q1 = vllm.static_scaled_int8_quant %x, %s {variant = #vllm.quant_variant<quotient f16>} : tensor<?x64xbf16>, tensor<1xbf16> -> tensor<?x64xi8>
  %q1 = vllm.static_scaled_int8_quant %x, %s {variant = #vllm.quant_variant<quotient f16>} : tensor<?x64xbf16>, tensor<1xbf16> -> tensor<?x64xi8>
  // CHECK-NEXT: %q2, %s2 = vllm.dynamic_per_token_scaled_fp8_quant %y zero_point(%zt : tensor<2x?x1xbf16>) {variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 7.812500e-03>} : tensor<2x?x64xbf16> -> tensor<2x?x64xf8E4M3FN>, tensor<?x1xbf16>
  %q2, %s2 = vllm.dynamic_per_token_scaled_fp8_quant %y zero_point(%zt : tensor<2x?x1xbf16>) {variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 0.0078125>} : tensor<2x?x64xbf16> -> tensor<2x?x64xf8E4M3FN>, tensor<?x1xbf16>
  // CHECK-NEXT: %q3, %s3 = vllm.dynamic_per_token_scaled_int8_quant %x {variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 7.812500e-03 range 1.275000e+02>} : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x1xbf16>
  %q3, %s3 = vllm.dynamic_per_token_scaled_int8_quant %x {variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 7.8125e-03 range 127.5>} : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x1xbf16>
  // CHECK-NEXT: %q4, %s4 = vllm.dynamic_per_token_scaled_fp8_quant %x {variant = #vllm.quant_variant<recip>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
  %q4, %s4 = vllm.dynamic_per_token_scaled_fp8_quant %x {variant = #vllm.quant_variant<recip>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
  // CHECK-NEXT: %q5, %s5 = vllm.per_token_group_fp8_quant %x {group_size = 32 : i64, use_ue8m0 = true, variant = #vllm.quant_variant<min_scale>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf32>
  %q5, %s5 = vllm.per_token_group_fp8_quant %x {group_size = 32 : i64, use_ue8m0 = true, variant = #vllm.quant_variant<min_scale>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf32>
  // A zero point per group (compressed-tensors FP8_BLOCK): x's leading dims and G.
  // CHECK-NEXT: %q7, %s7 = vllm.per_token_group_fp8_quant %y zero_point(%zg : tensor<2x?x2xbf16>) {group_size = 32 : i64, variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 7.812500e-03>} : tensor<2x?x64xbf16> -> tensor<2x?x64xf8E4M3FN>, tensor<?x2xbf16>
  %q7, %s7 = vllm.per_token_group_fp8_quant %y zero_point(%zg : tensor<2x?x2xbf16>) {group_size = 32 : i64, variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 0.0078125>} : tensor<2x?x64xbf16> -> tensor<2x?x64xf8E4M3FN>, tensor<?x2xbf16>
  // The default variant prints as before: no property at all.
  // CHECK-NEXT: %q6 = vllm.static_scaled_fp8_quant %x, %s : tensor<?x64xbf16>, tensor<1xbf16> -> tensor<?x64xf8E4M3FN>
  %q6 = vllm.static_scaled_fp8_quant %x, %s : tensor<?x64xbf16>, tensor<1xbf16> -> tensor<?x64xf8E4M3FN>
  func.return
}

// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<?x64xbf16>, %r: tensor<?x64xbf16>, %s: tensor<1xbf16>, %zp: tensor<1xbf16>, %zt: tensor<?x1xbf16>, %zg: tensor<?x2xbf16>) {
  // CHECK-NEXT: %q0 = vllm.rms_norm_quant %x scale(%s : tensor<1xbf16>) zero_point(%zp : tensor<1xbf16>) {epsilon = 1.000000e-05 : f64, scheme = #vllm.quant<static per_tensor div quotient bf16>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>
  %q0 = vllm.rms_norm_quant %x scale(%s : tensor<1xbf16>) zero_point(%zp : tensor<1xbf16>) {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<static per_tensor div quotient bf16>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>
  // CHECK-NEXT: %q1, %ro, %t1 = vllm.fused_add_rms_norm_quant %x, %r zero_point(%zt : tensor<?x1xbf16>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_token quotient bf16 scale bf16 zero_eps 7.812500e-03 range 1.275000e+02>} : tensor<?x64xbf16>, tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x64xbf16>, tensor<?x1xbf16>
  %q1, %ro, %t1 = vllm.fused_add_rms_norm_quant %x, %r zero_point(%zt : tensor<?x1xbf16>) {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<dynamic per_token quotient bf16 scale bf16 zero_eps 7.8125e-03 range 127.5>} : tensor<?x64xbf16>, tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x64xbf16>, tensor<?x1xbf16>
  // CHECK-NEXT: %q2, %t2 = vllm.silu_and_mul_quant %x {scheme = #vllm.quant<dynamic per_group 16 ue8m0 min_scale>} : tensor<?x64xbf16> -> tensor<?x32xf8E4M3FN>, tensor<?x2xf32>
  %q2, %t2 = vllm.silu_and_mul_quant %x {scheme = #vllm.quant<dynamic per_group 16 ue8m0 min_scale>} : tensor<?x64xbf16> -> tensor<?x32xf8E4M3FN>, tensor<?x2xf32>
  // CHECK-NEXT: %q4, %t4 = vllm.rms_norm_quant %x zero_point(%zg : tensor<?x2xbf16>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_group 32 quotient bf16 scale bf16 zero_eps 7.812500e-03>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x2xbf16>
  %q4, %t4 = vllm.rms_norm_quant %x zero_point(%zg : tensor<?x2xbf16>) {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<dynamic per_group 32 quotient bf16 scale bf16 zero_eps 7.8125e-03>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x2xbf16>
  // CHECK-NEXT: %q3, %t3 = vllm.rms_norm_quant %x {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
  %q3, %t3 = vllm.rms_norm_quant %x {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
  func.return
}
