// RUN: vllm-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @lengths(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error@+1 {{tokens and winners must be non-empty and of equal length, got 2 and 1}}
  %y = auto.rms_norm %x {epsilon = 1.0e-05 : f64, tokens = array<i64: 1, 2>, winners = ["native"]} : tensor<?x64xf32> -> tensor<?x64xf32>
  func.return %y : tensor<?x64xf32>
}

// -----

func.func @bounds(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error@+1 {{tokens must be ascending powers of two, got [4, 2]}}
  %y = auto.rms_norm %x {epsilon = 1.0e-05 : f64, tokens = array<i64: 4, 2>, winners = ["native", "triton"]} : tensor<?x64xf32> -> tensor<?x64xf32>
  func.return %y : tensor<?x64xf32>
}

// -----

func.func @winner(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error@+1 {{winners must be provider names, got 'auto'}}
  %y = auto.rms_norm %x {epsilon = 1.0e-05 : f64, tokens = array<i64: 1>, winners = ["auto"]} : tensor<?x64xf32> -> tensor<?x64xf32>
  func.return %y : tensor<?x64xf32>
}

// -----

func.func @semantic(%x: tensor<?x64xf32>) -> tensor<?x32xf32> {
  // The semantic op's own verifier still applies.
  // expected-error@+1 {{}}
  %y = auto.rms_norm %x {epsilon = 1.0e-05 : f64, tokens = array<i64: 1>, winners = ["native"]} : tensor<?x64xf32> -> tensor<?x32xf32>
  func.return %y : tensor<?x32xf32>
}

// CHECK-NOT: Traceback
