// RUN: vllm-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Provider ops run their semantic op's verifier, then check their own properties.

func.func @semantic_check(%x: tensor<?x64xbf16>, %w: tensor<32xbf16>) {
  %y = triton.rms_norm %x weight(%w : tensor<32xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'triton.rms_norm' op weight size 32 does not match the hidden size 64 of x

// -----

func.func @block_size(%x: tensor<?x64xbf16>) {
  %y = triton.rms_norm %x {epsilon = 1.0e-05 : f64, block_size = 96 : i64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'triton.rms_norm' op block_size must be a power of two in [1, 65536], got 96

// -----

func.func @num_warps(%x: tensor<?x64xbf16>) {
  %y = triton.rms_norm %x {epsilon = 1.0e-05 : f64, num_warps = 64 : i64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'triton.rms_norm' op num_warps must be a power of two in [1, 32], got 64

// -----

func.func @vec_width(%x: tensor<?x64xbf16>, %s: tensor<1xf32>) {
  %q = cuda.static_scaled_fp8_quant %x, %s {vec_width = 3 : i64} : tensor<?x64xbf16>, tensor<1xf32> -> tensor<?x64xf8E4M3FN>
  func.return
}
// CHECK: 'cuda.static_scaled_fp8_quant' op vec_width must be a power of two in [1, 16], got 3

// -----

func.func @no_inplace_variant(%x: tensor<?x64xbf16>) {
  %y = rocm.silu_and_mul %x {inplace} : tensor<?x64xbf16> -> tensor<?x32xbf16>
  func.return
}
// CHECK: 'rocm.silu_and_mul' op rocm.silu_and_mul has no in-place variant

// -----

func.func @unknown_property_kind(%x: tensor<?x64xbf16>) {
  %y = triton.rms_norm %x {epsilon = 1.0e-05 : f64, block_size = 1.0 : f32} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: provider_invalid.mlir:46:3: error: 'triton.rms_norm' op 1.000000e+00 : f32 should be of base attribute integer

// -----

func.func @provider_up_shape(%x: tensor<?x64xbf16>, %u: tensor<?x32xbf16>) {
  %y = cuda.gelu_tanh_and_mul %x up(%u : tensor<?x32xbf16>) : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'cuda.gelu_tanh_and_mul' op up must have the shape of x [?, 64], got [?, 32]
