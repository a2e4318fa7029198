// RUN: vllm-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// Every verifier message of the vllm dialect, one case per chunk.

func.func @weight_size(%x: tensor<?x64xbf16>, %w: tensor<32xbf16>) {
  %y = vllm.rms_norm %x weight(%w : tensor<32xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: vllm_invalid.mlir:6:3: error: 'vllm.rms_norm' op weight size 32 does not match the hidden size 64 of x

// -----

func.func @weight_rank(%x: tensor<?x64xbf16>, %w: tensor<2x64xbf16>) {
  %y = vllm.rms_norm %x weight(%w : tensor<2x64xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.rms_norm' op weight must have rank 1, got tensor<2x64xbf16>

// -----

func.func @no_epsilon(%x: tensor<?x64xbf16>) {
  %y = vllm.rms_norm %x : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.rms_norm' op epsilon must be given exactly once: as the `epsilon` property or as a runtime operand

// -----

func.func @two_epsilons(%x: tensor<?x64xbf16>, %e: tensor<f64>) {
  %y = vllm.rms_norm %x epsilon(%e : tensor<f64>) {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.rms_norm' op epsilon must be given exactly once: as the `epsilon` property or as a runtime operand

// -----

func.func @negative_epsilon(%x: tensor<?x64xbf16>) {
  %y = vllm.rms_norm %x {epsilon = -1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.rms_norm' op epsilon must be >= 0, got -1e-05

// -----

func.func @runtime_epsilon_not_scalar(%x: tensor<?x64xbf16>, %e: tensor<2xf64>) {
  %y = vllm.rms_norm %x epsilon(%e : tensor<2xf64>) : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.rms_norm' op runtime epsilon must be a float scalar or 0-d tensor, got tensor<2xf64>

// -----

func.func @variance_size(%x: tensor<?x64xbf16>) {
  %y = vllm.rms_norm %x {epsilon = 1.0e-05 : f64, variance_size = 65 : i64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.rms_norm' op variance_size 65 must be in 1..64 (the hidden size)

// -----

func.func @out_dtype(%x: tensor<?x64xbf16>) {
  %y = vllm.rms_norm %x {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xf32>
  func.return
}
// CHECK: 'vllm.rms_norm' op out must have element type bf16, got f32

// -----

func.func @activation_dtype(%x: tensor<?x64xi32>) {
  %y = vllm.rms_norm %x {epsilon = 1.0e-05 : f64} : tensor<?x64xi32> -> tensor<?x64xi32>
  func.return
}
// CHECK: 'vllm.rms_norm' op x must have element type f16, bf16 or f32, got i32

// -----

func.func @residual_shape(%x: tensor<?x64xbf16>, %r: tensor<?x32xbf16>) {
  %o, %ro = vllm.fused_add_rms_norm %x, %r {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16>, tensor<?x32xbf16> -> tensor<?x64xbf16>, tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.fused_add_rms_norm' op residual must have the shape of x [?, 64], got [?, 32]

// -----

func.func @rounded_sum_not_unit(%x: tensor<?x64xbf16>, %r: tensor<?x64xbf16>) {
  %o, %ro = vllm.fused_add_rms_norm %x, %r {epsilon = 1.0e-05 : f64, rounded_sum = true} : tensor<?x64xbf16>, tensor<?x64xbf16> -> tensor<?x64xbf16>, tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.fused_add_rms_norm' op true should be of base attribute unit

// -----

func.func @rounded_sum_without_sum(%x: tensor<?x64xbf16>) {
  %y = vllm.rms_norm %x {epsilon = 1.0e-05 : f64, rounded_sum} : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.rms_norm' op rounded_sum applies to the fused add ops (there is no sum to round here)

// -----

func.func @rounded_sum_without_sum_quant(%x: tensor<?x64xbf16>, %s: tensor<1xf32>) {
  %q = vllm.rms_norm_quant %x scale(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, rounded_sum, scheme = #vllm.quant<static per_tensor>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>
  func.return
}
// CHECK: 'vllm.rms_norm_quant' op rounded_sum applies to the fused add ops (there is no sum to round here)

// -----

func.func @quant_not_fp8(%x: tensor<?x64xbf16>, %s: tensor<1xf32>) {
  %q = vllm.static_scaled_fp8_quant %x, %s : tensor<?x64xbf16>, tensor<1xf32> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.static_scaled_fp8_quant' op quantized result q must be fp8, got element type bf16

// -----

func.func @int8_quant_not_int8(%x: tensor<?x64xbf16>, %s: tensor<1xf32>) {
  %q = vllm.static_scaled_int8_quant %x, %s : tensor<?x64xbf16>, tensor<1xf32> -> tensor<?x64xf8E4M3FN>
  func.return
}
// CHECK: 'vllm.static_scaled_int8_quant' op quantized result q must be int8, got element type f8E4M3FN

// -----

func.func @static_scale_shape(%x: tensor<?x64xbf16>, %s: tensor<2xf32>) {
  %q = vllm.static_scaled_fp8_quant %x, %s : tensor<?x64xbf16>, tensor<2xf32> -> tensor<?x64xf8E4M3FN>
  func.return
}
// CHECK: 'vllm.static_scaled_fp8_quant' op scale must be a float tensor of shape [1], got tensor<2xf32>

// -----

func.func @per_token_scales_shape(%x: tensor<7x64xbf16>) {
  %q, %s = vllm.dynamic_per_token_scaled_fp8_quant %x : tensor<7x64xbf16> -> tensor<7x64xf8E4M3FN>, tensor<7x2xf32>
  func.return
}
// CHECK: 'vllm.dynamic_per_token_scaled_fp8_quant' op scales must have shape [7, 1] for a per-token scheme, got [7, 2]

// -----

func.func @scales_dtype(%x: tensor<7x64xbf16>) {
  %q, %s = vllm.dynamic_per_token_scaled_int8_quant %x : tensor<7x64xbf16> -> tensor<7x64xi8>, tensor<7x1xbf16>
  func.return
}
// CHECK: 'vllm.dynamic_per_token_scaled_int8_quant' op scales must be f32, got bf16

// -----

func.func @group_size_divides(%x: tensor<?x96xbf16>) {
  %q, %s = vllm.per_token_group_fp8_quant %x {group_size = 64 : i64} : tensor<?x96xbf16> -> tensor<?x96xf8E4M3FN>, tensor<?x1xf32>
  func.return
}
// CHECK: 'vllm.per_token_group_fp8_quant' op group_size 64 does not divide the hidden size 96

// -----

func.func @group_scales_shape(%x: tensor<?x128xbf16>) {
  %q, %s = vllm.per_token_group_fp8_quant %x {group_size = 64 : i64} : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x4xf32>
  func.return
}
// CHECK: 'vllm.per_token_group_fp8_quant' op scales must have shape [?, 2] for a per-group scheme, got [?, 4]

// -----

func.func @silu_odd(%x: tensor<?x63xbf16>) {
  %m = vllm.silu_and_mul %x : tensor<?x63xbf16> -> tensor<?x31xbf16>
  func.return
}
// CHECK: 'vllm.silu_and_mul' op x needs an even last dimension (gate and up halves), got 63; or pass the up projection as up(...)

// -----

func.func @up_shape(%x: tensor<?x64xbf16>, %u: tensor<?x32xbf16>) {
  %m = vllm.gelu_and_mul %x up(%u : tensor<?x32xbf16>) : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.gelu_and_mul' op up must have the shape of x [?, 64], got [?, 32]

// -----

func.func @up_dtype(%x: tensor<?x64xbf16>, %u: tensor<?x64xf16>) {
  %m = vllm.gelu_tanh_and_mul %x up(%u : tensor<?x64xf16>) : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.gelu_tanh_and_mul' op up must have element type bf16, got f16

// -----

func.func @up_out_shape(%x: tensor<?x64xbf16>, %u: tensor<?x64xbf16>) {
  %m = vllm.silu_and_mul %x up(%u : tensor<?x64xbf16>) : tensor<?x64xbf16> -> tensor<?x32xbf16>
  func.return
}
// CHECK: 'vllm.silu_and_mul' op out must have the shape of x [?, 64], got [?, 32]

// -----

func.func @act_out_dtype(%x: tensor<?x64xbf16>) {
  %m = vllm.gelu_and_mul %x : tensor<?x64xbf16> -> tensor<?x32xf32>
  func.return
}
// CHECK: 'vllm.gelu_and_mul' op out must have element type bf16, got f32

// -----

func.func @act_quant_up(%x: tensor<?x256xbf16>, %u: tensor<?x128xbf16>, %s: tensor<1xf32>) {
  %q = vllm.gelu_tanh_and_mul_quant %x up(%u : tensor<?x128xbf16>) scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>
  func.return
}
// CHECK: 'vllm.gelu_tanh_and_mul_quant' op up must have the shape of x [?, 256], got [?, 128]

// -----

func.func @act_quant_q_shape(%x: tensor<?x128xbf16>, %u: tensor<?x128xbf16>, %s: tensor<1xf32>) {
  %q = vllm.gelu_and_mul_quant %x up(%u : tensor<?x128xbf16>) scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x128xbf16> -> tensor<?x64xf8E4M3FN>
  func.return
}
// CHECK: 'vllm.gelu_and_mul_quant' op q must have the shape of x [?, 128], got [?, 64]

// -----

func.func @silu_out_shape(%x: tensor<?x64xbf16>) {
  %m = vllm.silu_and_mul %x : tensor<?x64xbf16> -> tensor<?x64xbf16>
  func.return
}
// CHECK: 'vllm.silu_and_mul' op out must have the shape of x with the last dimension halved, got tensor<?x64xbf16>

// -----

func.func @scheme_vs_int8(%x: tensor<?x128xbf16>) {
  %q, %s = vllm.rms_norm_quant %x {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<dynamic per_group 64>} : tensor<?x128xbf16> -> tensor<?x128xi8>, tensor<?x2xf32>
  func.return
}
// CHECK: 'vllm.rms_norm_quant' op scheme #vllm.quant<dynamic per_group 64> does not fit result element type i8: per-group quantization is fp8 only

// -----

func.func @fused_result_not_quant(%x: tensor<?x128xbf16>, %s: tensor<1xf32>) {
  %q = vllm.rms_norm_quant %x scale(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x128xbf16> -> tensor<?x128xf16>
  func.return
}
// CHECK: 'vllm.rms_norm_quant' op quantized result q must be fp8 or int8, got element type f16

// -----

func.func @static_without_scale(%x: tensor<?x128xbf16>) {
  %q = vllm.rms_norm_quant %x {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>
  func.return
}
// CHECK: 'vllm.rms_norm_quant' op a static scheme needs a scale(...) operand

// -----

func.func @static_with_scales(%x: tensor<?x128xbf16>, %s: tensor<1xf32>) {
  %q, %t = vllm.rms_norm_quant %x scale(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<1xf32>
  func.return
}
// CHECK: 'vllm.rms_norm_quant' op a static scheme has no scales result (the scale is an input)

// -----

func.func @dynamic_with_scale(%x: tensor<?x128xbf16>, %s: tensor<1xf32>) {
  %q, %t = vllm.rms_norm_quant %x scale(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x1xf32>
  func.return
}
// CHECK: 'vllm.rms_norm_quant' op a dynamic scheme computes its scales: remove scale(...)

// -----

func.func @dynamic_without_scales(%x: tensor<?x128xbf16>) {
  %q = vllm.rms_norm_quant %x {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>
  func.return
}
// CHECK: 'vllm.rms_norm_quant' op a dynamic scheme needs a scales result

// -----

func.func @dynamic_per_tensor_fused(%x: tensor<?x128xbf16>) {
  %q, %t = vllm.rms_norm_quant %x {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<dynamic per_tensor>} : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<1xf32>
  func.return
}
// CHECK: 'vllm.rms_norm_quant' op dynamic per-tensor quantization cannot be fused (it needs a global reduction)

// -----

func.func @scale_ub_int8(%x: tensor<?x128xbf16>, %s: tensor<1xf32>) {
  %q, %t = vllm.rms_norm_quant %x scale_ub(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<dynamic per_token>} : tensor<?x128xbf16> -> tensor<?x128xi8>, tensor<?x1xf32>
  func.return
}
// CHECK: 'vllm.rms_norm_quant' op scale_ub applies to dynamic per-token fp8 only

// -----

func.func @fused_group_scales(%x: tensor<?x128xbf16>, %r: tensor<?x128xbf16>) {
  %q, %ro, %t = vllm.fused_add_rms_norm_quant %x, %r {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<dynamic per_group 32 column_major>} : tensor<?x128xbf16>, tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x128xbf16>, tensor<?x8xf32>
  func.return
}
// CHECK: 'vllm.fused_add_rms_norm_quant' op scales must have shape [?, 4] for a per-group scheme, got [?, 8]

// -----

func.func @silu_quant_group(%x: tensor<?x256xbf16>) {
  %q, %t = vllm.silu_and_mul_quant %x {scheme = #vllm.quant<dynamic per_group 48>} : tensor<?x256xbf16> -> tensor<?x128xf8E4M3FN>, tensor<?x2xf32>
  func.return
}
// CHECK: 'vllm.silu_and_mul_quant' op group_size 48 does not divide the hidden size 128

// -----

func.func @static_per_token_scheme(%x: tensor<?x128xbf16>, %s: tensor<1xf32>) {
  %q = vllm.rms_norm_quant %x scale(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<static per_token>} : tensor<?x128xbf16> -> tensor<?x128xf8E4M3FN>
  func.return
}
// CHECK: vllm_invalid.mlir:{{[0-9]+}}:{{[0-9]+}}: error: invalid quant scheme: a static scale is per tensor
