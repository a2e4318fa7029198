// RUN: vllm-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s

// Provider ops have the semantic op's operands and syntax plus implementation properties.

// CHECK-LABEL: func.func @providers
func.func @providers(%x: tensor<?x4096xbf16>, %r: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %s: tensor<1xf32>, %g: tensor<?x8192xbf16>) {
  // CHECK-NEXT: %a = triton.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64, block_size = 4096 : i64, num_warps = 8 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  %a = triton.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64, block_size = 4096 : i64, num_warps = 8 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  // CHECK-NEXT: %b, %bs = triton.rms_norm_quant %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<dynamic per_group 128 ue8m0>, block_size = 4096 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x32xf32>
  %b, %bs = triton.rms_norm_quant %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<dynamic per_group 128 ue8m0>, block_size = 4096 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x32xf32>
  // CHECK-NEXT: %c, %cr = cuda.fused_add_rms_norm %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64, inplace, vec_width = 8 : i64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  %c, %cr = cuda.fused_add_rms_norm %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64, inplace, vec_width = 8 : i64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  // CHECK-NEXT: %c1, %cr1 = triton.fused_add_rms_norm %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64, rounded_sum, block_size = 4096 : i64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  %c1, %cr1 = triton.fused_add_rms_norm %x, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64, rounded_sum, block_size = 4096 : i64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  // CHECK-NEXT: %d = cuda.static_scaled_fp8_quant %x, %s {vec_width = 8 : i64} : tensor<?x4096xbf16>, tensor<1xf32> -> tensor<?x4096xf8E4M3FN>
  %d = cuda.static_scaled_fp8_quant %x, %s {vec_width = 8 : i64} : tensor<?x4096xbf16>, tensor<1xf32> -> tensor<?x4096xf8E4M3FN>
  // CHECK-NEXT: %e = rocm.silu_and_mul_quant %g scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x8192xbf16> -> tensor<?x4096xf8E4M3FNUZ>
  %e = rocm.silu_and_mul_quant %g scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x8192xbf16> -> tensor<?x4096xf8E4M3FNUZ>
  // CHECK-NEXT: %e2 = triton.gelu_tanh_and_mul_quant %x up(%x : tensor<?x4096xbf16>) scale(%s : tensor<1xf32>) {block_size = 4096 : i64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
  %e2 = triton.gelu_tanh_and_mul_quant %x up(%x : tensor<?x4096xbf16>) scale(%s : tensor<1xf32>) {block_size = 4096 : i64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
  // CHECK-NEXT: %e3 = cuda.gelu_and_mul %g {vec_width = 8 : i64} : tensor<?x8192xbf16> -> tensor<?x4096xbf16>
  %e3 = cuda.gelu_and_mul %g {vec_width = 8 : i64} : tensor<?x8192xbf16> -> tensor<?x4096xbf16>
  // CHECK-NEXT: %f, %fs = rocm.dynamic_per_token_scaled_int8_quant %x : tensor<?x4096xbf16> -> tensor<?x4096xi8>, tensor<?x1xf32>
  %f, %fs = rocm.dynamic_per_token_scaled_int8_quant %x : tensor<?x4096xbf16> -> tensor<?x4096xi8>, tensor<?x1xf32>
  func.return
}
