// RUN: vllm-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s

// auto.<op>: the semantic op's operands and syntax plus the tuned table of the call site.

// CHECK-LABEL: func.func @selection
func.func @selection(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %s: tensor<1xf32>) -> (tensor<?x4096xbf16>, tensor<?x4096xf8E4M3FN>) {
  // CHECK-NEXT: %y = auto.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64, tokens = array<i64: 1, 2, 4>, winners = ["triton", "native", "my_kernels"]} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  %y = auto.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64, tokens = array<i64: 1, 2, 4>, winners = ["triton", "native", "my_kernels"]} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  // CHECK-NEXT: %q = auto.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<static per_tensor>, tokens = array<i64: 4096>, winners = ["cuda"]} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
  %q = auto.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<static per_tensor>, tokens = array<i64: 4096>, winners = ["cuda"]} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
  func.return %y, %q : tensor<?x4096xbf16>, tensor<?x4096xf8E4M3FN>
}
