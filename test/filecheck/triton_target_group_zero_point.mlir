// RUN: vllm-opt %s -t triton | filecheck %s

// A zero point per group ([..., G], compressed-tensors' FP8_BLOCK): the kernel loads this
// tile's groups' zero points, rounds them to the quotient dtype and adds them to each
// group's columns, the sum rounded again (OPS.md "Variants").

func.func @group_zero_points(%x: tensor<?x256xbf16>, %zg: tensor<?x2xbf16>, %y: tensor<?x128xf16>, %z1: tensor<?x1xbf16>) {
  %q, %s = triton.per_token_group_fp8_quant %x zero_point(%zg : tensor<?x2xbf16>) {group_size = 128 : i64, variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 0.0078125>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x2xbf16>
  // CHECK:      # ===== triton.per_token_group_fp8_quant: kernel per_token_group_fp8_quant_bf16_e4m3fn_dynamic_group128_geps1em10_quotient_bf16_scale_bf16_zero_eps_0p0078125_b256_nw4_zpgroup (1 op(s))
  // CHECK:      def per_token_group_fp8_quant_kernel(
  // CHECK:      zp_ptr,
  // CHECK-NEXT: zp_row_stride,
  // CHECK-NEXT: zp_group_stride,
  // CHECK:      groups = tile * (BLOCK // 128) + tl.arange(0, BLOCK // 128)
  // CHECK:      q = _round_bf16(q)
  // CHECK-NEXT: zp = _round_bf16(tl.load(zp_ptr + row * zp_row_stride + groups * zp_group_stride, mask=groups < N // 128).to(tl.float32))
  // CHECK-NEXT: q = _round_bf16(q + zp[:, None])
  // CHECK-NEXT: q = tl.clamp(q, -448.0, 448.0, propagate_nan=tl.PropagateNan.ALL)

  // Fused with the norm: the same epilogue.
  %q2, %s2 = triton.rms_norm_quant %x zero_point(%zg : tensor<?x2xbf16>) {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<dynamic per_group 128 quotient bf16 scale bf16 zero_eps 7.8125e-03>} : tensor<?x256xbf16> -> tensor<?x256xf8E4M3FN>, tensor<?x2xbf16>
  // CHECK:      # ===== triton.rms_norm_quant: kernel rms_norm_quant_bf16_eps1em06_e4m3fn_dynamic_group128_geps1em10_quotient_bf16_scale_bf16_zero_eps_0p0078125_b256_nw4_zpgroup (1 op(s))
  // CHECK:      zp_group_stride,
  // CHECK:      zp = _round_bf16(tl.load(zp_ptr + row * zp_row_stride + groups * zp_group_stride, mask=groups < H // 128).to(tl.float32))
  // CHECK-NEXT: q = _round_bf16(q + zp[:, None])

  // One group a row: its zero point is the row's (the per-row kernel).
  %q3, %s3 = triton.per_token_group_fp8_quant %y zero_point(%z1 : tensor<?x1xbf16>) {group_size = 128 : i64, variant = #vllm.quant_variant<quotient bf16 scale bf16 zero_eps 0.0078125>} : tensor<?x128xf16> -> tensor<?x128xf8E4M3FN>, tensor<?x1xbf16>
  // CHECK:      # ===== triton.per_token_group_fp8_quant: kernel {{.*}}_zptoken (1 op(s))
  // CHECK-NOT:  zp_group_stride
  // CHECK:      q = _round_bf16(q + _round_bf16(tl.load(zp_ptr + row * zp_row_stride).to(tl.float32)))
  // CHECK-NOT:  =====
  func.return
}
