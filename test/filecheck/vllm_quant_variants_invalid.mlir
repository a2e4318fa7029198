// RUN: vllm-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// Quant variants that make no sense for their op: each error names the variant.

func.func @static_scale_dtype(%x: tensor<?x64xbf16>, %s: tensor<1xf32>) {
  %q = vllm.static_scaled_fp8_quant %x, %s {variant = #vllm.quant_variant<scale bf16>} : tensor<?x64xbf16>, tensor<1xf32> -> tensor<?x64xf8E4M3FN>
  func.return
}
// CHECK: 'vllm.static_scaled_fp8_quant' op variant #vllm.quant_variant<scale bf16> does not fit static_scaled_fp8_quant: variant 'scale' applies to dynamic scales (a static scale is an input)

// -----

func.func @static_floor(%x: tensor<?x64xbf16>, %s: tensor<1xf32>) {
  %q = vllm.static_scaled_int8_quant %x, %s {variant = #vllm.quant_variant<zero_eps 1.0e-06>} : tensor<?x64xbf16>, tensor<1xf32> -> tensor<?x64xi8>
  func.return
}
// CHECK: variant 'zero_eps' applies to dynamic scales (a static scale is an input)

// -----

func.func @int8_min_scale(%x: tensor<?x64xbf16>) {
  %q, %s = vllm.dynamic_per_token_scaled_int8_quant %x {variant = #vllm.quant_variant<min_scale>} : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x1xf32>
  func.return
}
// CHECK: variant 'min_scale' is the fp8 floor 1 / (FMAX * 512), not an int8 one

// -----

func.func @scale_dtype_mismatch(%x: tensor<?x64xbf16>) {
  %q, %s = vllm.dynamic_per_token_scaled_fp8_quant %x {variant = #vllm.quant_variant<scale bf16>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
  func.return
}
// CHECK: 'vllm.dynamic_per_token_scaled_fp8_quant' op scales must be bf16, got f32

// -----

func.func @group_zero_point(%x: tensor<?x64xbf16>, %z: tensor<?x1xbf16>) {
  %q, %s = vllm.per_token_group_fp8_quant %x zero_point(%z : tensor<?x1xbf16>) {group_size = 32 : i64} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf32>
  func.return
}
// CHECK: zero_point must have shape [] or [1] or [?, 2], got tensor<?x1xbf16>

// -----

func.func @zero_point_shape(%x: tensor<?x64xbf16>, %s: tensor<1xf32>, %z: tensor<?x1xbf16>) {
  %q = vllm.static_scaled_fp8_quant %x, %s zero_point(%z : tensor<?x1xbf16>) : tensor<?x64xbf16>, tensor<1xf32> -> tensor<?x64xf8E4M3FN>
  func.return
}
// CHECK: zero_point must have shape [] or [1], got tensor<?x1xbf16>

// -----

func.func @group_eps_and_floor(%x: tensor<?x64xbf16>) {
  %q, %s = vllm.per_token_group_fp8_quant %x {group_size = 32 : i64, eps = 1.0e-06 : f64, variant = #vllm.quant_variant<min_scale>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x2xf32>
  func.return
}
// CHECK: variant 'min_scale' replaces the per-group absmax floor: drop eps

// -----

func.func @fused_static_range(%x: tensor<?x64xbf16>, %s: tensor<1xf32>) {
  %q = vllm.rms_norm_quant %x scale(%s : tensor<1xf32>) {epsilon = 1.0e-05 : f64, scheme = #vllm.quant<static per_tensor range 127.5>} : tensor<?x64xbf16> -> tensor<?x64xi8>
  func.return
}
// CHECK: invalid quant scheme: variant 'range' applies to dynamic scales (a static scale is an input)

// -----

func.func @bad_keyword_value(%x: tensor<?x64xbf16>) {
  %q, %s = vllm.dynamic_per_token_scaled_fp8_quant %x {variant = #vllm.quant_variant<quotient i8>} : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
  func.return
}
// CHECK: expected bf16, f16 or f32 after 'quotient'
