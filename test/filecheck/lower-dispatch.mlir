// RUN: vllm-opt %s --split-input-file --lower-dispatch=target=cuda | filecheck %s --check-prefix=CUDA
// RUN: vllm-opt %s --split-input-file --lower-dispatch=target=rocm | filecheck %s --check-prefix=ROCM
// RUN: vllm-opt %s --split-input-file --lower-dispatch=target=cpu | filecheck %s --check-prefix=CPU
// RUN: vllm-opt %s --split-input-file --lower-dispatch | filecheck %s --check-prefix=DEFAULT
// RUN: vllm-opt %s --split-input-file --lower-dispatch="target=cuda priority=rms_norm=triton,native;silu_and_mul=native" | filecheck %s --check-prefix=PRIO
// RUN: vllm-opt %s --split-input-file --lower-dispatch="target=rocm priority=triton" | filecheck %s --check-prefix=TRITON
// RUN: vllm-opt %s --split-input-file --lower-dispatch="target=cuda report=true" -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT

// Errors: one line each, naming the node, op, impl and reason.
// RUN: not vllm-opt %s --split-input-file --lower-dispatch="priority=rms_norm=fancy,native" 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not vllm-opt %s --split-input-file --lower-dispatch="target=rocm priority=silu_and_mul=cuda!" 2>&1 | filecheck %s --check-prefix=FORCED
// RUN: not vllm-opt %s --split-input-file --lower-dispatch="target=cuda priority=per_token_group_fp8_quant=triton!" 2>&1 | filecheck %s --check-prefix=FORCED-ARGS
// RUN: not vllm-opt %s --split-input-file --lower-dispatch=target=tpu 2>&1 | filecheck %s --check-prefix=BAD-TARGET
// RUN: not vllm-opt %s --split-input-file --lower-dispatch="priority=rms_norm=triton,,native" 2>&1 | filecheck %s --check-prefix=BAD-PRIO
// RUN: not vllm-opt %s --split-input-file --lower-dispatch="priority=rms_nrom=triton" 2>&1 | filecheck %s --check-prefix=BAD-OP
// RUN: not vllm-opt %s --split-input-file --lower-dispatch=tagret=cpu 2>&1 | filecheck %s --check-prefix=BAD-OPTION

// UNKNOWN: vllm-opt: error: pass 'lower-dispatch': option 'priority': unknown provider 'fancy' (known: {{.*}}cuda, native, rocm, triton{{.*}})
// UNKNOWN-NOT: Traceback
// FORCED: {{.*}}lower-dispatch.mlir: error: @layer %m: silu_and_mul: implementation silu_and_mul:cuda is forced by priority (explicit) but cannot run: the cuda kernels serve the cuda target, not rocm
// FORCED-NOT: Traceback
// FORCED-ARGS: {{.*}}lower-dispatch.mlir: error: @layer %gq: per_token_group_fp8_quant: implementation per_token_group_fp8_quant:triton is forced by priority (explicit) but cannot run: group_size 96 is not a power of two
// BAD-TARGET: vllm-opt: error: pass 'lower-dispatch': unknown target 'tpu' (expected one of cuda, rocm, cpu)
// BAD-PRIO: vllm-opt: error: pass 'lower-dispatch': option 'priority': bad priority 'rms_norm=triton,,native' for rms_norm: '' is not a provider name
// BAD-OP: vllm-opt: error: pass 'lower-dispatch': option 'priority': bad priority 'rms_nrom=triton': unknown op 'rms_nrom'
// BAD-OPTION: vllm-opt: error: pass 'lower-dispatch' has no option 'tagret' (options: target, priority, report)
// BAD-OPTION-NOT: Traceback

func.func @layer(%x: tensor<?x4096xbf16>, %r: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %s: tensor<1xf32>, %g: tensor<?x8192xbf16>, %h: tensor<?x4032xf16>) -> (tensor<?x4096xbf16>, tensor<?x4096xf8E4M3FN>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4032xf8E4M3FN>, tensor<?x42xf32>) {
  %y = vllm.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  %q = vllm.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<static per_tensor>} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
  %o, %ro = vllm.fused_add_rms_norm %y, %r weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-06 : f64} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
  %m = vllm.silu_and_mul %g : tensor<?x8192xbf16> -> tensor<?x4096xbf16>
  %gq, %gs = vllm.per_token_group_fp8_quant %h {group_size = 96 : i64} : tensor<?x4032xf16> -> tensor<?x4032xf8E4M3FN>, tensor<?x42xf32>
  func.return %o, %q, %ro, %m, %gq, %gs : tensor<?x4096xbf16>, tensor<?x4096xf8E4M3FN>, tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4032xf8E4M3FN>, tensor<?x42xf32>
}

// Target cuda (also the default without a vllm.target attribute): CUDA kernels, 16-byte
// loads (8 x bf16; 4032 = 8 * 504 halves only to 8 for f16... group 96 = 8 * 12).
// CUDA-LABEL: func.func @layer
// CUDA-NEXT:    %y = cuda.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64, vec_width = 8 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
// CUDA-NEXT:    %q = cuda.rms_norm_quant %x weight(%w : tensor<4096xbf16>) scale(%s : tensor<1xf32>) {epsilon = 1.000000e-06 : f64, scheme = #vllm.quant<static per_tensor>, vec_width = 8 : i64} : tensor<?x4096xbf16> -> tensor<?x4096xf8E4M3FN>
// The in-place kernel may overwrite %y (its only use) but not %r (the caller's): copy.
// CUDA-NEXT:    %r_copy = torch.call "aten::clone.default"(%r) [#torch.operand<0>] : (tensor<?x4096xbf16>) -> tensor<?x4096xbf16>
// CUDA-NEXT:    %o, %ro = cuda.fused_add_rms_norm %y, %r_copy weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-06 : f64, vec_width = 8 : i64, inplace} : tensor<?x4096xbf16>, tensor<?x4096xbf16> -> tensor<?x4096xbf16>, tensor<?x4096xbf16>
// CUDA-NEXT:    %m = cuda.silu_and_mul %g {vec_width = 8 : i64} : tensor<?x8192xbf16> -> tensor<?x4096xbf16>
// CUDA-NEXT:    %gq, %gs = cuda.per_token_group_fp8_quant %h {group_size = 96 : i64, vec_width = 8 : i64} : tensor<?x4032xf16> -> tensor<?x4032xf8E4M3FN>, tensor<?x42xf32>
// CUDA-NEXT:    func.return

// ROCM-LABEL: func.func @layer
// ROCM-NEXT:    %y = rocm.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64, vec_width = 8 : i64}
// ROCM-NEXT:    %q = rocm.rms_norm_quant
// ROCM-NEXT:    %r_copy = torch.call "aten::clone.default"(%r)
// ROCM-NEXT:    %o, %ro = rocm.fused_add_rms_norm %y, %r_copy {{.*}}inplace}
// ROCM-NEXT:    %m = rocm.silu_and_mul %g {vec_width = 8 : i64}
// ROCM-NEXT:    %gq, %gs = rocm.per_token_group_fp8_quant %h {group_size = 96 : i64, vec_width = 8 : i64}

// Target cpu: the native decomposition, in the native's order of casts.

// CPU-LABEL: func.func @layer
// CPU-NEXT:    %y_t = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x4096xbf16>) -> tensor<?x4096xf32>
// CPU-NEXT:    %y_t_1 = torch.call "aten::pow.Tensor_Scalar"(%y_t) [#torch.operand<0>, 2 : i64] : (tensor<?x4096xf32>) -> tensor<?x4096xf32>
// CPU-NEXT:    %y_t_2 = torch.call "aten::mean.dim"(%y_t_1) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x4096xf32>) -> tensor<?x1xf32>
// CPU-NEXT:    %y_t_3 = torch.call "aten::add.Tensor"(%y_t_2) [#torch.operand<0>, 1.000000e-05 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
// CPU-NEXT:    %y_t_4 = torch.call "aten::rsqrt.default"(%y_t_3) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
// CPU-NEXT:    %y_t_5 = torch.call "aten::mul.Tensor"(%y_t, %y_t_4) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xf32>, tensor<?x1xf32>) -> tensor<?x4096xf32>
// CPU-NEXT:    %y_t_6 = torch.call "prims::convert_element_type.default"(%y_t_5) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x4096xf32>) -> tensor<?x4096xbf16>
// CPU-NEXT:    %y = torch.call "aten::mul.Tensor"(%y_t_6, %w) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> tensor<?x4096xbf16>
// Static fp8 quant of the norm: multiply by the reciprocal, clamp to +-448, cast.
// CPU:         %q_t_8 = torch.call "aten::reciprocal.default"(%s)
// CPU-NEXT:    %q_t_9 = torch.call "prims::convert_element_type.default"(%q_t_7) [#torch.operand<0>, #torch.dtype<f32>]
// CPU-NEXT:    %q_t_10 = torch.call "aten::mul.Tensor"(%q_t_9, %q_t_8)
// CPU-NEXT:    %q_t_11 = torch.call "aten::clamp.default"(%q_t_10) [#torch.operand<0>, -4.480000e+02 : f64, 4.480000e+02 : f64]
// CPU-NEXT:    %q = torch.call "prims::convert_element_type.default"(%q_t_11) [#torch.operand<0>, #torch.dtype<f8E4M3FN>]
// fused_add_rms_norm: residual_out is the rounded sum; the norm sees the fp32 sum.
// CPU:         %o_t_2 = torch.call "aten::add.Tensor"(%o_t, %o_t_1)
// CPU-NEXT:    %ro = torch.call "prims::convert_element_type.default"(%o_t_2) [#torch.operand<0>, #torch.dtype<bf16>]
// CPU-NEXT:    %o_t_3 = torch.call "aten::pow.Tensor_Scalar"(%o_t_2)
// The natives' own ops (the lowering is traced from them, lowering/native.py): the two
// halves as the slices models write, and shape-free views, so an unknown token count
// lowers as well.
// CPU:         %m_t = torch.call "aten::slice.Tensor"(%g) [#torch.operand<0>, 1 : i64, 0 : i64, 4096 : i64] : (tensor<?x8192xbf16>) -> tensor<?x4096xbf16>
// CPU-NEXT:    %m_t_1 = torch.call "aten::slice.Tensor"(%g) [#torch.operand<0>, 1 : i64, 4096 : i64, 9223372036854775807 : i64] : (tensor<?x8192xbf16>) -> tensor<?x4096xbf16>
// CPU-NEXT:    %m_t_2 = torch.call "aten::silu.default"(%m_t)
// CPU-NEXT:    %m = torch.call "aten::mul.Tensor"(%m_t_2, %m_t_1)
// Per-group: [T, G, group], absmax per group, scales [T, G].
// CPU:         torch.call "aten::view.default"(%{{.*}}) [#torch.operand<0>, [-1 : i64, 42 : i64, 96 : i64]] : (tensor<?x4032xf32>) -> tensor<?x42x96xf32>
// CPU:         %gq = torch.call "aten::view.default"
// CPU-NEXT:    %gs = torch.call "aten::squeeze.dim"(%{{.*}}) [#torch.operand<0>, -1 : i64] : (tensor<?x42x1xf32>) -> tensor<?x42xf32>
// CPU-NOT:     vllm.
// CPU:         func.return

// An explicit priority decides per op; ops it does not name keep the target's default.
// PRIO-LABEL: func.func @layer
// PRIO-NEXT:    %y = triton.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64, block_size = 4096 : i64, num_warps = 8 : i64}
// PRIO-NEXT:    %q = cuda.rms_norm_quant
// PRIO:         %o, %ro = cuda.fused_add_rms_norm
// PRIO-NEXT:    %m_t = torch.call "aten::slice.Tensor"(%g)
// PRIO:         %m = torch.call "aten::mul.Tensor"
// PRIO-NEXT:    %gq, %gs = cuda.per_token_group_fp8_quant

// A bare list covers every op; triton rejects a group size that is not a power of two,
// so that op falls through to native.
// TRITON-LABEL: func.func @layer
// TRITON-NEXT:    %y = triton.rms_norm {{.*}}block_size = 4096 : i64, num_warps = 8 : i64}
// TRITON-NEXT:    %q = triton.rms_norm_quant
// TRITON-NEXT:    %o, %ro = triton.fused_add_rms_norm %y, %r
// TRITON-NEXT:    %m = triton.silu_and_mul %g {block_size = 4096 : i64, num_warps = 8 : i64}
// TRITON-NEXT:    %gq_t = torch.call "prims::convert_element_type.default"(%h)

// REPORT:      dispatch report: 5 node(s)
// REPORT-NEXT: @layer %y: rms_norm -> cuda
// REPORT-NEXT:     note: out of place: x: it is a function argument (the caller still owns it)
// REPORT-NEXT: @layer %q: rms_norm_quant -> cuda
// REPORT-NEXT: @layer %o: fused_add_rms_norm -> cuda
// REPORT-NEXT:     note: in place: overwrites x (its only use)
// REPORT-NEXT:     note: copied residual for the in-place kernel: it is a function argument (the caller still owns it)
// REPORT-NEXT: @layer %m: silu_and_mul -> cuda
// REPORT-NEXT: @layer %gq: per_token_group_fp8_quant -> cuda
// REPORT:      dispatch report: 1 node(s)
// REPORT-NEXT: @attr %y: rms_norm -> cuda

// -----

// The module attribute vllm.target sets the default target; the option overrides it.
builtin.module attributes {vllm.target = "rocm"} {
  func.func @attr(%x: tensor<7x64xf32>) -> tensor<7x64xf32> {
    %y = vllm.rms_norm %x {epsilon = 1.0e-06 : f64} : tensor<7x64xf32> -> tensor<7x64xf32>
    func.return %y : tensor<7x64xf32>
  }
}

// f32: 16-byte loads are 4 elements.
// CUDA-LABEL: func.func @attr
// CUDA-NEXT:    %y = cuda.rms_norm %x {epsilon = 1.000000e-06 : f64, vec_width = 4 : i64}
// DEFAULT-LABEL: func.func @layer
// DEFAULT-NEXT:    %y = cuda.rms_norm
// DEFAULT-LABEL: func.func @attr
// DEFAULT-NEXT:    %y = rocm.rms_norm %x {epsilon = 1.000000e-06 : f64, vec_width = 4 : i64}
// CPU-LABEL: func.func @attr
// CPU-NEXT:    %y_t = torch.call "aten::pow.Tensor_Scalar"(%x)
