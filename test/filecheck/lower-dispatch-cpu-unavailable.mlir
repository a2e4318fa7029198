// On a CPU without AVX2, FMA or F16C the cpu provider cannot run: preferred, it gives way to
// the native decomposition; forced, it is a one-line error naming what the CPU lacks.
// UNSUPPORTED: cpu-kernels
// RUN: vllm-opt %s --lower-dispatch="target=cpu priority=cpu" | filecheck %s --check-prefix=PREFERRED
// RUN: not vllm-opt %s --lower-dispatch="target=cpu priority=rms_norm=cpu!" 2>&1 | filecheck %s --check-prefix=FORCED

func.func @norm(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> tensor<?x4096xbf16> {
  %y = vllm.rms_norm %x weight(%w : tensor<4096xbf16>) {epsilon = 1.0e-05 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
  func.return %y : tensor<?x4096xbf16>
}

// PREFERRED-LABEL: func.func @norm
// PREFERRED-NOT: cpu.rms_norm
// PREFERRED: torch.call "aten::rsqrt.default"
// FORCED: error: @norm %y: rms_norm: implementation rms_norm:cpu is forced by priority (explicit) but cannot run: cpu: this CPU lacks {{.+}} (the kernels need AVX2, FMA and F16C)
// FORCED-NOT: Traceback
