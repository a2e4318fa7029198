// RUN: vllm-opt %s -t triton | filecheck %s

// `-t triton` prints one generated kernel per distinct KernelSpec of the module's triton
// ops: the header names the spec, only the code the spec needs is emitted.

func.func @kernels(%x: tensor<?x4096xbf16>, %r: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %s: tensor<1xf32>, %g: tensor<?x8192xf16>, %eps: tensor<f64>) {
  // A baked epsilon; two ops with the same spec share one kernel.
  %a = triton.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64, block_size = 4096 : i64, num_warps = 8 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  %a2 = triton.rms_norm %r weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64, block_size = 4096 : i64, num_warps = 8 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  // CHECK:      # ===== triton.rms_norm: kernel rms_norm_bf16_wbf16_eps1em05_b4096_nw8 (2 op(s))
  // CHECK:      #   epsilon = 1e-05
  // CHECK:      def _round_bf16(x):
  // CHECK-NOT:  _e4m3_encode
  // CHECK:      def rms_norm_kernel(
  // CHECK-NOT:  residual
  // CHECK:      mask = cols < H
  // CHECK:      x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
  // CHECK:      y = x * tl.div_rn(1.0, tl.sqrt_rn(var + 1e-05))
  // CHECK:      y = _round_bf16(_round_bf16(y) * w)
  // CHECK:      tl.store(out_ptr + row * out_row_stride + cols, y.to(tl.bfloat16), mask=mask)

  // Runtime epsilon, residual, per-group fp8 with ue8m0 and column-major scales.
  %b, %br, %bs = triton.fused_add_rms_norm_quant %x, %r weight(%w : tensor<4096xbf16>) epsilon(%eps : tensor<f64>) {scheme = #vllm.quant<dynamic per_group 128 column_major ue8m0>} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>, tensor<?x4096xbf16>, tensor<?x32xf32>
  // CHECK:      # ===== triton.fused_add_rms_norm_quant: kernel fused_add_rms_norm_quant_bf16_wbf16_e4m3fn_dynamic_group128_colmajor_ue8m0_geps1em10_b4096_nw8 (1 op(s))
  // CHECK:      #   epsilon = runtime argument
  // CHECK:      def _max_nan(a, b):
  // CHECK:      def _div_rn_by(y, d, inv):
  // CHECK:      def _pow2_ceil(s):
  // CHECK:      def fused_add_rms_norm_quant_kernel(
  // CHECK:      scales_group_stride,
  // CHECK-NEXT: epsilon,
  // CHECK:      cols = tl.arange(0, BLOCK // 128)[:, None] * 128 + tl.arange(0, 128)[None, :]
  // CHECK:      tl.store(residual_out_ptr + row * residual_out_row_stride + cols, _round_bf16(x).to(tl.bfloat16), mask=mask)
  // CHECK:      var = tl.div_rn(tl.sum(x * x, axis=None), H * 1.0)
  // CHECK-NEXT: y = x * tl.div_rn(1.0, tl.sqrt_rn(var + epsilon))
  // CHECK:      # quantize: float8_e4m3fn, dynamic per group of 128, column-major scales, ue8m0, eps 1e-10
  // CHECK:      scale = tl.div_rn(_max_nan(tl.reduce(tl.abs(y), 1, _max_nan), 1e-10), 448.0)
  // CHECK:      scale = _pow2_ceil(scale)
  // One division per group, exact quotients by fma corrections; far-out scales divide.
  // CHECK:      if (tl.min(scale, axis=0) >= 5.421010862427522e-20) & (tl.max(scale, axis=0) <= 1.8446744073709552e+19):
  // CHECK-NEXT:     inv = tl.div_rn(1.0, scale)
  // CHECK-NEXT:     q = _div_rn_by(y, scale[:, None], inv[:, None])
  // CHECK-NEXT: else:
  // CHECK-NEXT:     q = tl.div_rn(y, scale[:, None])
  // CHECK-NEXT: q = tl.clamp(q, -448.0, 448.0, propagate_nan=tl.PropagateNan.ALL)
  // CHECK-NEXT: # q_ptr is the fp8 output viewed as uint8: store the e4m3 bits
  // CHECK-NEXT: tl.store(q_ptr + row * q_row_stride + cols, _e4m3_encode(q, -6, 512.0, 0.015625, True), mask=mask)

  // silu_and_mul with a static e4m3fnuz scale (FMAX 224, smallest normal 2^-7).
  %c = triton.silu_and_mul_quant %g scale(%s : tensor<1xf32>) {scheme = #vllm.quant<static per_tensor>} : tensor<?x8192xf16> -> tensor<?x4096xf8E4M3FNUZ>
  // CHECK:      # ===== triton.silu_and_mul_quant: kernel silu_and_mul_quant_f16_e4m3fnuz_static_tensor_b4096_nw8 (1 op(s))
  // CHECK:      def silu_and_mul_quant_kernel(
  // CHECK:      b = tl.load(x_ptr + row * x_row_stride + D + cols, mask=mask, other=0.0).to(tl.float32)
  // CHECK:      y = (a / (1.0 + tl.exp(-a))).to(tl.float16).to(tl.float32)
  // CHECK:      q = y * tl.div_rn(1.0, scale)
  // CHECK:      q = tl.clamp(q, -224.0, 224.0, propagate_nan=tl.PropagateNan.ALL)
  // CHECK-NEXT: # q_ptr is the fp8 output viewed as uint8: store the e4m3 bits
  // CHECK-NEXT: tl.store(q_ptr + row * q_row_stride + cols, _e4m3_encode(q, -7, 1024.0, 0.0078125, False), mask=mask)

  // int8 per token: round half to even.
  %d, %ds = triton.dynamic_per_token_scaled_int8_quant %x : tensor<?x4096xbf16> -> tensor<?x4096xi8>, tensor<?x1xf32>
  // CHECK:      # ===== triton.dynamic_per_token_scaled_int8_quant: kernel dynamic_per_token_scaled_int8_quant_bf16_i8_dynamic_token_b4096_nw8 (1 op(s))
  // CHECK:      def _rint(x):
  // CHECK:      scale = tl.div_rn(amax, 127.0)
  // CHECK:      divisor = tl.where(scale == 0.0, 1.0, scale)
  // CHECK:      q = _div_rn_by(y, divisor, inv)
  // CHECK:      q = _rint(q)
  // CHECK-NEXT: tl.store(q_ptr + row * q_row_stride + cols, q.to(tl.int8), mask=mask)
  // CHECK-NOT:  =====
  func.return
}
