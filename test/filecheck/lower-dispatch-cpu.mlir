// The cpu provider (the host build of the kernels) runs only on a CPU with the instruction
// sets its kernels need; lit.cfg names the feature. Without it, forcing the provider is a
// one-line error naming why (lower-dispatch-cpu-unavailable.mlir).
// REQUIRES: cpu-kernels
// RUN: vllm-opt %s --split-input-file --lower-dispatch="target=cpu priority=cpu" | filecheck %s --check-prefix=CPUDEF

func.func @layer(%x: tensor<?x4096xbf16>, %r: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %s: tensor<1xf32>, %g: tensor<?x8192xbf16>, %h: tensor<?x4032xf16>) -> (tensor<?x4096xbf16>, tensor<?x4096xf8E4M3FN>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4032xf8E4M3FN>, tensor<?x42xf32>) {
  %y = vllm.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  %q = vllm.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
  %o, %ro = vllm.fused_add_rms_norm %y, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  %m = vllm.silu_and_mul %g : tensor<?x8192xbf16> -> tensor<?x4096xbf16>
  %gq, %gs = vllm.per_token_group_fp8_quant %h {group_size = 96 : i64} : tensor<?x4032xf16> -> tensor<?x4032xf8E4M3FN>, tensor<?x42xf32>
  func.return %o, %q, %ro, %m, %gq, %gs : tensor<?x4096xbf16>, tensor<?x4096xf8E4M3FN>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4032xf8E4M3FN>, tensor<?x42xf32>
}

// Target cpu with the host build of the kernels (opt-in; no vector-width property), the
// in-place fused add as on cuda.
// CPUDEF-LABEL: func.func @layer
// CPUDEF-NEXT:    %y = cpu.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
// CPUDEF-NEXT:    %q = cpu.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
// CPUDEF-NEXT:    %r_copy = torch.call "aten::clone.default"(%r) [#torch.operand<0>] : (tensor<?x4096xbf16>) -> tensor<?x4096xbf16>
// CPUDEF-NEXT:    %o, %ro = cpu.fused_add_rms_norm %y, %r_copy weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-06 : f64, inplace} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
// CPUDEF-NEXT:    %m = cpu.silu_and_mul %g : tensor<?x8192xbf16> -> tensor<?x4096xbf16>
// CPUDEF-NEXT:    %gq, %gs = cpu.per_token_group_fp8_quant %h {group_size = 96 : i64} : tensor<?x4032xf16> -> tensor<?x4032xf8E4M3FN>, tensor<?x42xf32>
// CPUDEF-NEXT:    func.return
