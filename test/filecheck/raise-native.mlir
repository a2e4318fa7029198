// RUN: vllm-opt %s --raise-native | filecheck %s
// RUN: vllm-opt %s --raise-native=exact=true | filecheck %s --check-prefix=EXACT
// (A run with `--raise-native=approx=true` once checked the same IR as the default run: the
// option changed nothing and is gone.)

// IR as the FX importer writes the aten graphs of torch.compile (Inductor's decompositions:
// prims.convert_element_type casts, clamp_min + clamp_max, decomposed silu).

// ----- RMSNorm -----------------------------------------------------------------------------

// HF LlamaRMSNorm, literal epsilon, weight multiply after the cast back.
// CHECK-LABEL: func.func @hf_norm
// CHECK-NEXT:    %[[N:.*]] = vllm.rms_norm %x weight(%w : tensor<64xbf16>) {epsilon = 1.000000e-06 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
// CHECK-NEXT:    func.return %[[N]]
// EXACT-LABEL: func.func @hf_norm
// EXACT-NEXT:    vllm.rms_norm %x weight(%w : tensor<64xbf16>) {epsilon = 1.000000e-06 : f64}
func.func @hf_norm(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> tensor<?x64xbf16> {
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %p = torch.call "aten::pow.Tensor_Scalar"(%xf) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %yb = torch.call "prims::convert_element_type.default"(%y) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  %o = torch.call "aten::mul.Tensor"(%w, %yb) [#torch.operand<0>, #torch.operand<1>] : (tensor<64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  func.return %o : tensor<?x64xbf16>
}

// dynamic=True: epsilon is a 0-d f64 graph input, cast to f32 before the add. It stays a
// runtime operand (the graph input itself), never a constant. `.float()` as _to_copy.
// CHECK-LABEL: func.func @runtime_epsilon
// CHECK-NEXT:    %[[N:.*]] = vllm.rms_norm %x weight(%w : tensor<4096xf16>) epsilon(%eps : tensor<f64>) : tensor<?x4096xf16> -> tensor<?x4096xf16>
// CHECK-NEXT:    func.return %[[N]]
func.func @runtime_epsilon(%x: tensor<?x4096xf16>, %eps: tensor<f64>, %w: tensor<4096xf16>) -> tensor<?x4096xf16> {
  %xf = torch.call "aten::_to_copy.default"(%x) [#torch.operand<0>] kwargs {dtype = #torch.dtype<f32>} : (tensor<?x4096xf16>) -> tensor<?x4096xf32>
  %p = torch.call "aten::pow.Tensor_Scalar"(%xf) [#torch.operand<0>, 2 : i64] : (tensor<?x4096xf32>) -> tensor<?x4096xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x4096xf32>) -> tensor<?x1xf32>
  %e64 = torch.call "prims::convert_element_type.default"(%eps) [#torch.operand<0>, #torch.dtype<f64>] : (tensor<f64>) -> tensor<f64>
  %e32 = torch.call "prims::convert_element_type.default"(%e64) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<f64>) -> tensor<f32>
  %a = torch.call "aten::add.Tensor"(%var, %e32) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x1xf32>, tensor<f32>) -> tensor<?x1xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xf32>, tensor<?x1xf32>) -> tensor<?x4096xf32>
  %yh = torch.call "aten::_to_copy.default"(%y) [#torch.operand<0>] kwargs {dtype = #torch.dtype<f16>} : (tensor<?x4096xf32>) -> tensor<?x4096xf16>
  %o = torch.call "aten::mul.Tensor"(%yh, %w) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xf16>, tensor<4096xf16>) -> tensor<?x4096xf16>
  func.return %o : tensor<?x4096xf16>
}

// `x / sqrt(var + eps)`, f32 model, x * x for the square: raised (an f32 ulp from
// `* rsqrt`), but not with exact=true.
// CHECK-LABEL: func.func @sqrt_div_f32
// CHECK-NEXT:    %[[N:.*]] = vllm.rms_norm %x weight(%w : tensor<64xf32>) {epsilon = 3.000000e-07 : f64} : tensor<3x64xf32> -> tensor<3x64xf32>
// CHECK-NEXT:    func.return %[[N]]
// EXACT-LABEL: func.func @sqrt_div_f32
// EXACT-NOT:     vllm.
// EXACT:         aten::sqrt.default
func.func @sqrt_div_f32(%x: tensor<3x64xf32>, %w: tensor<64xf32>) -> tensor<3x64xf32> {
  %p = torch.call "aten::mul.Tensor"(%x) [#torch.operand<0>, #torch.operand<0>] : (tensor<3x64xf32>) -> tensor<3x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [1 : i64], true] : (tensor<3x64xf32>) -> tensor<3x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 3.000000e-07 : f64] : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %s = torch.call "aten::sqrt.default"(%a) [#torch.operand<0>] : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %y = torch.call "aten::div.Tensor"(%x, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<3x64xf32>, tensor<3x1xf32>) -> tensor<3x64xf32>
  %o = torch.call "aten::mul.Tensor"(%y, %w) [#torch.operand<0>, #torch.operand<1>] : (tensor<3x64xf32>, tensor<64xf32>) -> tensor<3x64xf32>
  func.return %o : tensor<3x64xf32>
}

// Weight multiply in f32 before the cast back, with a bf16 weight: torch promotes the
// weight to f32, so the contract form is rms_norm with the weight cast to f32.
// CHECK-LABEL: func.func @weight_before_cast
// CHECK-NEXT:    %[[WF:.*]] = torch.call "prims::convert_element_type.default"(%w) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<64xbf16>) -> tensor<64xf32>
// CHECK-NEXT:    %[[N:.*]] = vllm.rms_norm %x weight(%[[WF]] : tensor<64xf32>) {epsilon = 1.000000e-05 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
// CHECK-NEXT:    func.return %[[N]]
func.func @weight_before_cast(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> tensor<?x64xbf16> {
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %p = torch.call "aten::pow.Tensor_Scalar"(%xf) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-05 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %yw = torch.call "aten::mul.Tensor"(%w, %y) [#torch.operand<0>, #torch.operand<1>] : (tensor<64xbf16>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %o = torch.call "prims::convert_element_type.default"(%yw) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  func.return %o : tensor<?x64xbf16>
}

// Gemma: `out * (1 + w.float())` in f32, then `.type_as(x)`: the computed f32 weight.
// CHECK-LABEL: func.func @gemma
// CHECK:         %[[W1:.*]] = torch.call "aten::add.Tensor"
// CHECK-NEXT:    %[[N:.*]] = vllm.rms_norm %x weight(%[[W1]] : tensor<64xf32>) {epsilon = 1.000000e-06 : f64} : tensor<?x64xf16> -> tensor<?x64xf16>
// CHECK-NEXT:    func.return %[[N]]
func.func @gemma(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xf16>) -> tensor<?x64xf32>
  %p = torch.call "aten::pow.Tensor_Scalar"(%xf) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %wf = torch.call "prims::convert_element_type.default"(%w) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<64xf16>) -> tensor<64xf32>
  %w1 = torch.call "aten::add.Tensor"(%wf) [#torch.operand<0>, 1.000000e+00 : f64] : (tensor<64xf32>) -> tensor<64xf32>
  %yw = torch.call "aten::mul.Tensor"(%y, %w1) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %o = torch.call "prims::convert_element_type.default"(%yw) [#torch.operand<0>, #torch.dtype<f16>] : (tensor<?x64xf32>) -> tensor<?x64xf16>
  func.return %o : tensor<?x64xf16>
}

// HF decoder residual: `h = x + r` in bf16, then the norm. The graph normalises the
// bf16-rounded sum: that is the rounded_sum variant of fused_add_rms_norm, exactly, so it
// is raised at every level, and the later user of h reads residual_out.
// CHECK-LABEL: func.func @residual_add
// CHECK-NEXT:    %[[O:.*]], %[[R:.*]] = vllm.fused_add_rms_norm %x, %r weight(%w : tensor<64xbf16>) epsilon(%eps : tensor<f64>) {rounded_sum} : tensor<?x64xbf16>, tensor<?x64xbf16> -> tensor<?x64xbf16>, tensor<?x64xbf16>
// CHECK-NEXT:    %[[NEXT:.*]] = torch.call "aten::add.Tensor"(%[[O]], %[[R]])
// CHECK-NEXT:    func.return %[[NEXT]]
// EXACT-LABEL: func.func @residual_add
// EXACT-NEXT:    vllm.fused_add_rms_norm %x, %r weight(%w : tensor<64xbf16>) epsilon(%eps : tensor<f64>) {rounded_sum}
func.func @residual_add(%x: tensor<?x64xbf16>, %r: tensor<?x64xbf16>, %w: tensor<64xbf16>, %eps: tensor<f64>) -> tensor<?x64xbf16> {
  %h = torch.call "aten::add.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  %xf = torch.call "prims::convert_element_type.default"(%h) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %p = torch.call "aten::pow.Tensor_Scalar"(%xf) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %e32 = torch.call "prims::convert_element_type.default"(%eps) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<f64>) -> tensor<f32>
  %a = torch.call "aten::add.Tensor"(%var, %e32) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x1xf32>, tensor<f32>) -> tensor<?x1xf32>
  %rs = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %rs) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %yb = torch.call "prims::convert_element_type.default"(%y) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  %o = torch.call "aten::mul.Tensor"(%w, %yb) [#torch.operand<0>, #torch.operand<1>] : (tensor<64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  %next = torch.call "aten::add.Tensor"(%o, %h) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  func.return %next : tensor<?x64xbf16>
}

// Gemma's residual in f16: `h = x + r`, then the norm with the f32 weight `1 + w.float()`
// applied before the cast back: the rounded_sum variant with that f32 weight.
// CHECK-LABEL: func.func @gemma_residual_add
// CHECK-NEXT:    %[[WF:.*]] = torch.call "prims::convert_element_type.default"(%w)
// CHECK-NEXT:    %[[W1:.*]] = torch.call "aten::add.Tensor"(%[[WF]])
// CHECK-NEXT:    %[[O:.*]], %[[R:.*]] = vllm.fused_add_rms_norm %x, %r weight(%[[W1]] : tensor<64xf32>) {epsilon = 1.000000e-06 : f64, rounded_sum} : tensor<?x64xf16>, tensor<?x64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
// CHECK-NEXT:    func.return %[[O]], %[[R]]
func.func @gemma_residual_add(%x: tensor<?x64xf16>, %r: tensor<?x64xf16>, %w: tensor<64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %h = torch.call "aten::add.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf16>, tensor<?x64xf16>) -> tensor<?x64xf16>
  %xf = torch.call "prims::convert_element_type.default"(%h) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xf16>) -> tensor<?x64xf32>
  %p = torch.call "aten::pow.Tensor_Scalar"(%xf) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %rs = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %rs) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %wf = torch.call "prims::convert_element_type.default"(%w) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<64xf16>) -> tensor<64xf32>
  %w1 = torch.call "aten::add.Tensor"(%wf) [#torch.operand<0>, 1.000000e+00 : f64] : (tensor<64xf32>) -> tensor<64xf32>
  %yw = torch.call "aten::mul.Tensor"(%y, %w1) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %o = torch.call "prims::convert_element_type.default"(%yw) [#torch.operand<0>, #torch.dtype<f16>] : (tensor<?x64xf32>) -> tensor<?x64xf16>
  func.return %o, %h : tensor<?x64xf16>, tensor<?x64xf16>
}

// vLLM's native fused_add_rms_norm: the sum in f32, residual_out = sum.to(bf16), the norm
// of the unrounded sum: exactly the contract.
// CHECK-LABEL: func.func @vllm_fused_add
// CHECK-NEXT:    %[[O:.*]], %[[R:.*]] = vllm.fused_add_rms_norm %x, %r weight(%w : tensor<64xbf16>) {epsilon = 1.000000e-06 : f64}
// CHECK-NEXT:    func.return %[[O]], %[[R]]
// EXACT-LABEL: func.func @vllm_fused_add
// EXACT-NEXT:    vllm.fused_add_rms_norm %x, %r weight(%w : tensor<64xbf16>)
func.func @vllm_fused_add(%x: tensor<?x64xbf16>, %r: tensor<?x64xbf16>, %w: tensor<64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>) {
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %rf = torch.call "prims::convert_element_type.default"(%r) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %s = torch.call "aten::add.Tensor"(%xf, %rf) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %res = torch.call "prims::convert_element_type.default"(%s) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  %p = torch.call "aten::pow.Tensor_Scalar"(%s) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %rs = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%s, %rs) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %yb = torch.call "prims::convert_element_type.default"(%y) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  %o = torch.call "aten::mul.Tensor"(%yb, %w) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xbf16>, tensor<64xbf16>) -> tensor<?x64xbf16>
  func.return %o, %res : tensor<?x64xbf16>, tensor<?x64xbf16>
}

// An intermediate value with another user (the rsqrt is returned too) is kept.
// CHECK-LABEL: func.func @intermediate_used
// CHECK:         %[[RS:.*]] = torch.call "aten::rsqrt.default"
// CHECK-NEXT:    %[[N:.*]] = vllm.rms_norm %x {epsilon = 1.000000e-06 : f64} : tensor<?x64xf32> -> tensor<?x64xf32>
// CHECK-NEXT:    func.return %[[N]], %[[RS]]
func.func @intermediate_used(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x1xf32>) {
  %p = torch.call "aten::pow.Tensor_Scalar"(%x) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %rs = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%rs, %x) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x1xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  func.return %y, %rs : tensor<?x64xf32>, tensor<?x1xf32>
}

// HF with an f32 weight on bf16 activations: `w * y.to(bf16)` is an f32 result of the
// bf16-rounded norm, not the contract's weight multiply: the norm is raised, the mul stays.
// CHECK-LABEL: func.func @f32_weight_on_bf16
// CHECK-NEXT:    %[[N:.*]] = vllm.rms_norm %x {epsilon = 1.000000e-06 : f64} : tensor<?x64xbf16> -> tensor<?x64xbf16>
// CHECK-NEXT:    %[[M:.*]] = torch.call "aten::mul.Tensor"(%w, %[[N]])
// CHECK-NEXT:    func.return %[[M]]
func.func @f32_weight_on_bf16(%x: tensor<?x64xbf16>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %p = torch.call "aten::pow.Tensor_Scalar"(%xf) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %yb = torch.call "prims::convert_element_type.default"(%y) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  %o = torch.call "aten::mul.Tensor"(%w, %yb) [#torch.operand<0>, #torch.operand<1>] : (tensor<64xf32>, tensor<?x64xbf16>) -> tensor<?x64xf32>
  func.return %o : tensor<?x64xf32>
}

// ----- RMSNorm negatives: the meaning differs, nothing is raised -------------------------

// CHECK-LABEL: func.func @neg_mean_other_dim
// CHECK-NOT:     vllm.
// CHECK:         func.return
func.func @neg_mean_other_dim(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %p = torch.call "aten::pow.Tensor_Scalar"(%x) [#torch.operand<0>, 2 : i64] : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [0 : i64], true] : (tensor<8x64xf32>) -> tensor<1x64xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<1x64xf32>) -> tensor<1x64xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<1x64xf32>) -> tensor<1x64xf32>
  %y = torch.call "aten::mul.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<8x64xf32>, tensor<1x64xf32>) -> tensor<8x64xf32>
  func.return %y : tensor<8x64xf32>
}

// CHECK-LABEL: func.func @neg_no_keepdim
// CHECK-NOT:     vllm.
// CHECK:         func.return
func.func @neg_no_keepdim(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %p = torch.call "aten::pow.Tensor_Scalar"(%x) [#torch.operand<0>, 2 : i64] : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64]] : (tensor<64x64xf32>) -> tensor<64xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<64xf32>) -> tensor<64xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<64xf32>) -> tensor<64xf32>
  %y = torch.call "aten::mul.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xf32>
  func.return %y : tensor<64x64xf32>
}

// CHECK-LABEL: func.func @neg_eps_after_rsqrt
// CHECK-NOT:     vllm.
// CHECK:         func.return
func.func @neg_eps_after_rsqrt(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %p = torch.call "aten::pow.Tensor_Scalar"(%x) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %r = torch.call "aten::rsqrt.default"(%var) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%r) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%x, %a) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  func.return %y : tensor<?x64xf32>
}

// A cube instead of a square, and the square of another tensor: not a variance of x.
// CHECK-LABEL: func.func @neg_not_the_square
// CHECK-NOT:     vllm.
// CHECK:         func.return
func.func @neg_not_the_square(%x: tensor<?x64xf32>, %z: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %p = torch.call "aten::pow.Tensor_Scalar"(%x) [#torch.operand<0>, 3 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %p2 = torch.call "aten::pow.Tensor_Scalar"(%z) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var2 = torch.call "aten::mean.dim"(%p2) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a2 = torch.call "aten::add.Tensor"(%var2) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %r2 = torch.call "aten::rsqrt.default"(%a2) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y2 = torch.call "aten::mul.Tensor"(%x, %r2) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  func.return %y, %y2 : tensor<?x64xf32>, tensor<?x64xf32>
}

// A per-element eps (shape [64]) and a negative eps are not an epsilon.
// CHECK-LABEL: func.func @neg_eps_not_scalar
// CHECK-NOT:     vllm.
// CHECK:         func.return
func.func @neg_eps_not_scalar(%x: tensor<?x64xf32>, %e: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %p = torch.call "aten::pow.Tensor_Scalar"(%x) [#torch.operand<0>, 2 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %var = torch.call "aten::mean.dim"(%p) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %a = torch.call "aten::add.Tensor"(%var, %e) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x1xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %r = torch.call "aten::rsqrt.default"(%a) [#torch.operand<0>] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %y = torch.call "aten::mul.Tensor"(%x, %r) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %a2 = torch.call "aten::add.Tensor"(%var) [#torch.operand<0>, -1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %r2 = torch.call "aten::rsqrt.default"(%a2) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y2 = torch.call "aten::mul.Tensor"(%x, %r2) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  func.return %y, %y2 : tensor<?x64xf32>, tensor<?x64xf32>
}

// ----- static fp8 quant --------------------------------------------------------------------

// vLLM: `x.float() * scale.reciprocal()`, clamp(±448), to(fp8): exactly the contract.
// CHECK-LABEL: func.func @static_reciprocal
// CHECK-NEXT:    %[[Q:.*]] = vllm.static_scaled_fp8_quant %x, %s : tensor<?x64xbf16>, tensor<1xf32> -> tensor<?x64xf8E4M3FN>
// CHECK-NEXT:    func.return %[[Q]]
// EXACT-LABEL: func.func @static_reciprocal
// EXACT-NEXT:    vllm.static_scaled_fp8_quant %x, %s
func.func @static_reciprocal(%x: tensor<?x64xbf16>, %s: tensor<1xf32>) -> tensor<?x64xf8E4M3FN> {
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %inv = torch.call "aten::reciprocal.default"(%s) [#torch.operand<0>] : (tensor<1xf32>) -> tensor<1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %inv) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<1xf32>) -> tensor<?x64xf32>
  %c = torch.call "aten::clamp.default"(%y) [#torch.operand<0>, -4.480000e+02 : f64, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q = torch.call "aten::_to_copy.default"(%c) [#torch.operand<0>] kwargs {dtype = #torch.dtype<f8E4M3FN>} : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  func.return %q : tensor<?x64xf8E4M3FN>
}

// HF-style `x / scale` with bf16 x and an f32 scale: the division is in f32 (torch
// promotes), the clamp is clamp_min + clamp_max. It divides where the contract multiplies
// by the reciprocal: the exact `div` variant, raised at every level.
// CHECK-LABEL: func.func @static_div
// CHECK-NEXT:    %[[Q:.*]] = vllm.static_scaled_fp8_quant %x, %s {variant = #vllm.quant_variant<div>} : tensor<?x64xbf16>, tensor<1xf32> -> tensor<?x64xf8E4M3FN>
// CHECK-NEXT:    func.return %[[Q]]
// EXACT-LABEL: func.func @static_div
// EXACT-NEXT:    vllm.static_scaled_fp8_quant %x, %s {variant = #vllm.quant_variant<div>}
func.func @static_div(%x: tensor<?x64xbf16>, %s: tensor<1xf32>) -> tensor<?x64xf8E4M3FN> {
  %y = torch.call "aten::div.Tensor"(%x, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xbf16>, tensor<1xf32>) -> tensor<?x64xf32>
  %lo = torch.call "aten::clamp_min.default"(%y) [#torch.operand<0>, -4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %hi = torch.call "aten::clamp_max.default"(%lo) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q = torch.call "prims::convert_element_type.default"(%hi) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  func.return %q : tensor<?x64xf8E4M3FN>
}

// f16 model: `y / scale` in f16, then f32, clamp, f16, fp8 (Inductor's cast chain). The
// quotient is rounded to f16 before fp8 (the f16 after the clamp commutes with it): the
// exact `div quotient f16` variant. e4m3fnuz clamps at 224.
// CHECK-LABEL: func.func @static_f16_chain_fnuz
// CHECK-NEXT:    %[[Q:.*]] = vllm.static_scaled_fp8_quant %x, %s {variant = #vllm.quant_variant<div quotient f16>} : tensor<?x64xf16>, tensor<1xf16> -> tensor<?x64xf8E4M3FNUZ>
// CHECK-NEXT:    func.return %[[Q]]
func.func @static_f16_chain_fnuz(%x: tensor<?x64xf16>, %s: tensor<1xf16>) -> tensor<?x64xf8E4M3FNUZ> {
  %y = torch.call "aten::div.Tensor"(%x, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf16>, tensor<1xf16>) -> tensor<?x64xf16>
  %yf = torch.call "prims::convert_element_type.default"(%y) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xf16>) -> tensor<?x64xf32>
  %lo = torch.call "aten::clamp_min.default"(%yf) [#torch.operand<0>, -2.240000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %hi = torch.call "aten::clamp_max.default"(%lo) [#torch.operand<0>, 2.240000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %yh = torch.call "prims::convert_element_type.default"(%hi) [#torch.operand<0>, #torch.dtype<f16>] : (tensor<?x64xf32>) -> tensor<?x64xf16>
  %q = torch.call "prims::convert_element_type.default"(%yh) [#torch.operand<0>, #torch.dtype<f8E4M3FNUZ>] : (tensor<?x64xf16>) -> tensor<?x64xf8E4M3FNUZ>
  func.return %q : tensor<?x64xf8E4M3FNUZ>
}

// After model.to(bf16) the scale buffer is bf16 and `y / scale` rounds to bf16 before fp8
// (2.3 % of values differ from the contract): the exact `div quotient bf16` variant.
// CHECK-LABEL: func.func @static_bf16_div
// CHECK-NEXT:    %[[Q:.*]] = vllm.static_scaled_fp8_quant %x, %s {variant = #vllm.quant_variant<div quotient bf16>} : tensor<?x64xbf16>, tensor<1xbf16> -> tensor<?x64xf8E4M3FN>
// CHECK-NEXT:    func.return %[[Q]]
func.func @static_bf16_div(%x: tensor<?x64xbf16>, %s: tensor<1xbf16>) -> tensor<?x64xf8E4M3FN> {
  %y = torch.call "aten::div.Tensor"(%x, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xbf16>, tensor<1xbf16>) -> tensor<?x64xbf16>
  %yf = torch.call "prims::convert_element_type.default"(%y) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %lo = torch.call "aten::clamp_min.default"(%yf) [#torch.operand<0>, -4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %hi = torch.call "aten::clamp_max.default"(%lo) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %yb = torch.call "prims::convert_element_type.default"(%hi) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  %q = torch.call "prims::convert_element_type.default"(%yb) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xbf16>) -> tensor<?x64xf8E4M3FN>
  func.return %q : tensor<?x64xf8E4M3FN>
}

// Negatives: a clamp to other bounds (240 = torch's finfo max of e4m3fnuz, not OPS.md's
// 224; 400 for e4m3fn), a missing upper bound, no clamp at all, a bf16 reciprocal.
// CHECK-LABEL: func.func @neg_static_bounds
// CHECK-NOT:     vllm.
// CHECK:         func.return
func.func @neg_static_bounds(%x: tensor<?x64xf32>, %s: tensor<1xf32>, %sb: tensor<1xbf16>) -> (tensor<?x64xf8E4M3FNUZ>, tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>) {
  %y = torch.call "aten::div.Tensor"(%x, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<1xf32>) -> tensor<?x64xf32>
  %c1 = torch.call "aten::clamp.default"(%y) [#torch.operand<0>, -2.400000e+02 : f64, 2.400000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q1 = torch.call "prims::convert_element_type.default"(%c1) [#torch.operand<0>, #torch.dtype<f8E4M3FNUZ>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FNUZ>
  %c2 = torch.call "aten::clamp.default"(%y) [#torch.operand<0>, -4.000000e+02 : f64, 4.000000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q2 = torch.call "prims::convert_element_type.default"(%c2) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  %c3 = torch.call "aten::clamp_min.default"(%y) [#torch.operand<0>, -4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q3 = torch.call "prims::convert_element_type.default"(%c3) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  %q4 = torch.call "prims::convert_element_type.default"(%y) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  %inv = torch.call "aten::reciprocal.default"(%sb) [#torch.operand<0>] : (tensor<1xbf16>) -> tensor<1xbf16>
  %y5 = torch.call "aten::mul.Tensor"(%x, %inv) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<1xbf16>) -> tensor<?x64xf32>
  %c5 = torch.call "aten::clamp.default"(%y5) [#torch.operand<0>, -4.480000e+02 : f64, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q5 = torch.call "prims::convert_element_type.default"(%c5) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  func.return %q1, %q2, %q3, %q4, %q5 : tensor<?x64xf8E4M3FNUZ>, tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>
}

// Bounds as `torch.compile(dynamic=True)` spells compressed-tensors' fp8 range
// `torch.tensor(FP8_E4M3_DATA.max)`: 0-d `scalar_tensor`s of literals (a lifted constant
// when floats are specialized), a bf16 quotient: raised as with number bounds.
// CHECK-LABEL: func.func @scalar_tensor_bounds
// CHECK-NEXT:    %[[Q:.*]] = vllm.static_scaled_fp8_quant %x, %s {variant = #vllm.quant_variant<div quotient bf16>} : tensor<?x64xbf16>, tensor<1xbf16> -> tensor<?x64xf8E4M3FN>
// CHECK-NEXT:    func.return %[[Q]]
func.func @scalar_tensor_bounds(%x: tensor<?x64xbf16>, %s: tensor<1xbf16>) -> tensor<?x64xf8E4M3FN> {
  %hi = torch.call "aten::scalar_tensor.default"() [4.480000e+02 : f64] kwargs {dtype = #torch.dtype<f32>, device = #torch.device<"cpu">, pin_memory = false} : () -> tensor<f32>
  %lo = torch.call "aten::scalar_tensor.default"() [-4.480000e+02 : f64] kwargs {dtype = #torch.dtype<f32>, device = #torch.device<"cpu">, pin_memory = false} : () -> tensor<f32>
  %y = torch.call "aten::div.Tensor"(%x, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xbf16>, tensor<1xbf16>) -> tensor<?x64xbf16>
  %yf = torch.call "prims::convert_element_type.default"(%y) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %c1 = torch.call "aten::clamp_min.Tensor"(%yf, %lo) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %c2 = torch.call "aten::clamp_max.Tensor"(%c1, %hi) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32>
  %q = torch.call "prims::convert_element_type.default"(%c2) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  func.return %q : tensor<?x64xf8E4M3FN>
}

// Negatives: a `scalar_tensor` of another value (400), and a 0-d bound that is a runtime
// value (a graph input: its value is not known when compiling).
// CHECK-LABEL: func.func @neg_scalar_tensor_bounds
// CHECK-NOT:     vllm.
// CHECK:         func.return
func.func @neg_scalar_tensor_bounds(%x: tensor<?x64xf32>, %s: tensor<1xf32>, %b: tensor<f32>) -> (tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>) {
  %lo = torch.call "aten::scalar_tensor.default"() [-4.480000e+02 : f64] kwargs {dtype = #torch.dtype<f32>} : () -> tensor<f32>
  %hi = torch.call "aten::scalar_tensor.default"() [4.000000e+02 : f64] kwargs {dtype = #torch.dtype<f32>} : () -> tensor<f32>
  %y = torch.call "aten::div.Tensor"(%x, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<1xf32>) -> tensor<?x64xf32>
  %c1 = torch.call "aten::clamp.Tensor"(%y, %lo, %hi) [#torch.operand<0>, #torch.operand<1>, #torch.operand<2>] : (tensor<?x64xf32>, tensor<f32>, tensor<f32>) -> tensor<?x64xf32>
  %q1 = torch.call "prims::convert_element_type.default"(%c1) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  %c2 = torch.call "aten::clamp.Tensor"(%y, %lo, %b) [#torch.operand<0>, #torch.operand<1>, #torch.operand<2>] : (tensor<?x64xf32>, tensor<f32>, tensor<f32>) -> tensor<?x64xf32>
  %q2 = torch.call "prims::convert_element_type.default"(%c2) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  func.return %q1, %q2 : tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>
}

// ----- dynamic per-token fp8 quant ---------------------------------------------------------

// amax(abs(x)) in bf16 (exact), to f32, / 448, clamp_min(1/(448*512)), x.float() / s.
// The returned scales become the op's scales result.
// CHECK-LABEL: func.func @per_token_amax
// CHECK-NEXT:    %[[Q:.*]], %[[S:.*]] = vllm.dynamic_per_token_scaled_fp8_quant %x : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
// CHECK-NEXT:    func.return %[[Q]], %[[S]]
// EXACT-LABEL: func.func @per_token_amax
// EXACT-NEXT:    vllm.dynamic_per_token_scaled_fp8_quant %x
func.func @per_token_amax(%x: tensor<?x64xbf16>) -> (tensor<?x64xf8E4M3FN>, tensor<?x1xf32>) {
  %ab = torch.call "aten::abs.default"(%x) [#torch.operand<0>] : (tensor<?x64xbf16>) -> tensor<?x64xbf16>
  %am = torch.call "aten::amax.default"(%ab) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xbf16>) -> tensor<?x1xbf16>
  %amf = torch.call "prims::convert_element_type.default"(%am) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x1xbf16>) -> tensor<?x1xf32>
  %d = torch.call "aten::div.Tensor"(%amf) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %s = torch.call "aten::clamp_min.default"(%d) [#torch.operand<0>, 4.3596540178571426e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %y = torch.call "aten::div.Tensor"(%xf, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %lo = torch.call "aten::clamp_min.default"(%y) [#torch.operand<0>, -4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %hi = torch.call "aten::clamp_max.default"(%lo) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q = torch.call "prims::convert_element_type.default"(%hi) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  func.return %q, %s : tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
}

// Two symbolic leading dims (dynamic=True, a batch above 1): the returned [?, ?, 1] scale
// is the op's [B*T, 1] scales reshaped by the sizes of q (x's shape; x keeps one use).
// CHECK-LABEL: func.func @per_token_two_dynamic_dims
// CHECK-NEXT:    %[[Q:.*]], %[[S:.*]] = vllm.dynamic_per_token_scaled_fp8_quant %x : tensor<?x?x64xbf16> -> tensor<?x?x64xf8E4M3FN>, tensor<?x1xf32>
// CHECK-NEXT:    %[[B:.*]] = torch.call "aten::sym_size.int"(%[[Q]]) [#torch.operand<0>, 0 : i64] : (tensor<?x?x64xf8E4M3FN>) -> i64
// CHECK-NEXT:    %[[T:.*]] = torch.call "aten::sym_size.int"(%[[Q]]) [#torch.operand<0>, 1 : i64] : (tensor<?x?x64xf8E4M3FN>) -> i64
// CHECK-NEXT:    %[[R:.*]] = torch.call "aten::reshape.default"(%[[S]], %[[B]], %[[T]]) [#torch.operand<0>, [#torch.operand<1>, #torch.operand<2>, 1 : i64]] : (tensor<?x1xf32>, i64, i64) -> tensor<?x?x1xf32>
// CHECK-NEXT:    func.return %[[Q]], %[[R]]
func.func @per_token_two_dynamic_dims(%x: tensor<?x?x64xbf16>) -> (tensor<?x?x64xf8E4M3FN>, tensor<?x?x1xf32>) {
  %ab = torch.call "aten::abs.default"(%x) [#torch.operand<0>] : (tensor<?x?x64xbf16>) -> tensor<?x?x64xbf16>
  %am = torch.call "aten::amax.default"(%ab) [#torch.operand<0>, [2 : i64], true] : (tensor<?x?x64xbf16>) -> tensor<?x?x1xbf16>
  %amf = torch.call "prims::convert_element_type.default"(%am) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x?x1xbf16>) -> tensor<?x?x1xf32>
  %d = torch.call "aten::div.Tensor"(%amf) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %s = torch.call "aten::clamp_min.default"(%d) [#torch.operand<0>, 4.3596540178571426e-06 : f64] : (tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x?x64xbf16>) -> tensor<?x?x64xf32>
  %y = torch.call "aten::div.Tensor"(%xf, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %lo = torch.call "aten::clamp_min.default"(%y) [#torch.operand<0>, -4.480000e+02 : f64] : (tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %hi = torch.call "aten::clamp_max.default"(%lo) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %q = torch.call "prims::convert_element_type.default"(%hi) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x?x64xf32>) -> tensor<?x?x64xf8E4M3FN>
  func.return %q, %s : tensor<?x?x64xf8E4M3FN>, tensor<?x?x1xf32>
}

// vLLM's native form: max(dim) + unsqueeze, and `x * s.reciprocal()` where the contract
// divides: the exact `recip` variant.
// CHECK-LABEL: func.func @per_token_vllm
// CHECK-NEXT:    %[[Q:.*]], %[[S:.*]] = vllm.dynamic_per_token_scaled_fp8_quant %x {variant = #vllm.quant_variant<recip>} : tensor<?x64xf16> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
// CHECK-NEXT:    func.return %[[Q]]
func.func @per_token_vllm(%x: tensor<?x64xf16>) -> tensor<?x64xf8E4M3FN> {
  %ab = torch.call "aten::abs.default"(%x) [#torch.operand<0>] : (tensor<?x64xf16>) -> tensor<?x64xf16>
  %mx, %idx = torch.call "aten::max.dim"(%ab) [#torch.operand<0>, -1 : i64] : (tensor<?x64xf16>) -> (tensor<?xf16>, tensor<?xi64>)
  %un = torch.call "aten::unsqueeze.default"(%mx) [#torch.operand<0>, -1 : i64] : (tensor<?xf16>) -> tensor<?x1xf16>
  %amf = torch.call "prims::convert_element_type.default"(%un) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x1xf16>) -> tensor<?x1xf32>
  %d = torch.call "aten::div.Tensor"(%amf) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %s = torch.call "aten::clamp_min.default"(%d) [#torch.operand<0>, 4.3596540178571426e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %xf = torch.call "prims::convert_element_type.default"(%x) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xf16>) -> tensor<?x64xf32>
  %inv = torch.call "aten::reciprocal.default"(%s) [#torch.operand<0>] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::mul.Tensor"(%xf, %inv) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %lo = torch.call "aten::clamp_min.default"(%y) [#torch.operand<0>, -4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %hi = torch.call "aten::clamp_max.default"(%lo) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q = torch.call "prims::convert_element_type.default"(%hi) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  func.return %q : tensor<?x64xf8E4M3FN>
}

// vLLM with scale_ub: `x_max.clamp(max=scale_ub)` before the division -> scale_ub(...).
// CHECK-LABEL: func.func @per_token_scale_ub
// CHECK-NEXT:    %[[Q:.*]], %[[S:.*]] = vllm.dynamic_per_token_scaled_fp8_quant %x scale_ub(%ub : tensor<1xf32>) : tensor<?x64xf32> -> tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
// CHECK-NEXT:    func.return %[[Q]], %[[S]]
func.func @per_token_scale_ub(%x: tensor<?x64xf32>, %ub: tensor<1xf32>) -> (tensor<?x64xf8E4M3FN>, tensor<?x1xf32>) {
  %ab = torch.call "aten::abs.default"(%x) [#torch.operand<0>] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %am = torch.call "aten::amax.default"(%ab) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %mn = torch.call "aten::clamp_max.Tensor"(%am, %ub) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x1xf32>, tensor<1xf32>) -> tensor<?x1xf32>
  %d = torch.call "aten::div.Tensor"(%mn) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %s = torch.call "aten::clamp_min.default"(%d) [#torch.operand<0>, 4.3596540178571426e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y = torch.call "aten::div.Tensor"(%x, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %c = torch.call "aten::clamp.default"(%y) [#torch.operand<0>, -4.480000e+02 : f64, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q = torch.call "prims::convert_element_type.default"(%c) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  func.return %q, %s : tensor<?x64xf8E4M3FN>, tensor<?x1xf32>
}

// Negatives: FMAX that is a graph input (a float global under dynamic=True: its value is
// not known here), another minimum scale, the absmax of another tensor.
// CHECK-LABEL: func.func @neg_per_token
// CHECK-NOT:     vllm.
// CHECK:         func.return
func.func @neg_per_token(%x: tensor<?x64xf32>, %z: tensor<?x64xf32>, %fmax: tensor<f32>) -> (tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>) {
  %ab = torch.call "aten::abs.default"(%x) [#torch.operand<0>] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %am = torch.call "aten::amax.default"(%ab) [#torch.operand<0>, [-1 : i64], true] : (tensor<?x64xf32>) -> tensor<?x1xf32>
  %d1 = torch.call "aten::div.Tensor"(%am, %fmax) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x1xf32>, tensor<f32>) -> tensor<?x1xf32>
  %s1 = torch.call "aten::clamp_min.default"(%d1) [#torch.operand<0>, 4.3596540178571426e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y1 = torch.call "aten::div.Tensor"(%x, %s1) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %c1 = torch.call "aten::clamp.default"(%y1) [#torch.operand<0>, -4.480000e+02 : f64, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q1 = torch.call "prims::convert_element_type.default"(%c1) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  %d2 = torch.call "aten::div.Tensor"(%am) [#torch.operand<0>, 4.480000e+02 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %s2 = torch.call "aten::clamp_min.default"(%d2) [#torch.operand<0>, 1.000000e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y2 = torch.call "aten::div.Tensor"(%x, %s2) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %c2 = torch.call "aten::clamp.default"(%y2) [#torch.operand<0>, -4.480000e+02 : f64, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q2 = torch.call "prims::convert_element_type.default"(%c2) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  %s3 = torch.call "aten::clamp_min.default"(%d2) [#torch.operand<0>, 4.3596540178571426e-06 : f64] : (tensor<?x1xf32>) -> tensor<?x1xf32>
  %y3 = torch.call "aten::div.Tensor"(%z, %s3) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x1xf32>) -> tensor<?x64xf32>
  %c3 = torch.call "aten::clamp.default"(%y3) [#torch.operand<0>, -4.480000e+02 : f64, 4.480000e+02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %q3 = torch.call "prims::convert_element_type.default"(%c3) [#torch.operand<0>, #torch.dtype<f8E4M3FN>] : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  func.return %q1, %q2, %q3 : tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>, tensor<?x64xf8E4M3FN>
}

// ----- SiLU-and-mul ------------------------------------------------------------------------

// Slice form with Inductor's decomposed silu (f32 inside, rounded back to bf16).
// CHECK-LABEL: func.func @silu_slice
// CHECK-NEXT:    %[[M:.*]] = vllm.silu_and_mul %x : tensor<?x128xbf16> -> tensor<?x64xbf16>
// CHECK-NEXT:    func.return %[[M]]
// EXACT-LABEL: func.func @silu_slice
// EXACT-NOT:     vllm.
// EXACT:         func.return
func.func @silu_slice(%x: tensor<?x128xbf16>) -> tensor<?x64xbf16> {
  %g = torch.call "aten::slice.Tensor"(%x) [#torch.operand<0>, 1 : i64, 0 : i64, 64 : i64] : (tensor<?x128xbf16>) -> tensor<?x64xbf16>
  %gf = torch.call "prims::convert_element_type.default"(%g) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x64xbf16>) -> tensor<?x64xf32>
  %n = torch.call "aten::neg.default"(%gf) [#torch.operand<0>] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %e = torch.call "aten::exp.default"(%n) [#torch.operand<0>] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %a = torch.call "aten::add.Tensor"(%e) [#torch.operand<0>, 1 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %sf = torch.call "aten::div.Tensor"(%gf, %a) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %s = torch.call "prims::convert_element_type.default"(%sf) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  %u = torch.call "aten::slice.Tensor"(%x) [#torch.operand<0>, 1 : i64, 64 : i64, 9223372036854775807 : i64] : (tensor<?x128xbf16>) -> tensor<?x64xbf16>
  %m = torch.call "aten::mul.Tensor"(%s, %u) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xbf16>, tensor<?x64xbf16>) -> tensor<?x64xbf16>
  func.return %m : tensor<?x64xbf16>
}

// split / chunk (AOTAutograd turns chunk into split) with aten.silu: exact.
// CHECK-LABEL: func.func @silu_split
// CHECK-NEXT:    %[[M:.*]] = vllm.silu_and_mul %x : tensor<2x?x128xf16> -> tensor<2x?x64xf16>
// CHECK-NEXT:    func.return %[[M]]
// EXACT-LABEL: func.func @silu_split
// EXACT-NEXT:    vllm.silu_and_mul %x
func.func @silu_split(%x: tensor<2x?x128xf16>) -> tensor<2x?x64xf16> {
  %g, %u = torch.call "aten::split.Tensor"(%x) [#torch.operand<0>, 64 : i64, -1 : i64] : (tensor<2x?x128xf16>) -> (tensor<2x?x64xf16>, tensor<2x?x64xf16>)
  %s = torch.call "aten::silu.default"(%g) [#torch.operand<0>] : (tensor<2x?x64xf16>) -> tensor<2x?x64xf16>
  %m = torch.call "aten::mul.Tensor"(%u, %s) [#torch.operand<0>, #torch.operand<1>] : (tensor<2x?x64xf16>, tensor<2x?x64xf16>) -> tensor<2x?x64xf16>
  func.return %m : tensor<2x?x64xf16>
}

// The halves swapped (silu of the second half) and a split along another dim are exact
// two-operand forms: gate and up are any two tensors of one type.
// CHECK-LABEL: func.func @silu_two_operands
// CHECK:         %[[M:.*]] = vllm.silu_and_mul %u up(%g : tensor<8x64xf16>) : tensor<8x64xf16> -> tensor<8x64xf16>
// CHECK:         %[[M2:.*]] = vllm.silu_and_mul %a up(%b : tensor<4x128xf16>) : tensor<4x128xf16> -> tensor<4x128xf16>
// CHECK-NEXT:    func.return %[[M]], %[[M2]]
// EXACT-LABEL: func.func @silu_two_operands
// EXACT:         vllm.silu_and_mul %u up(%g
// EXACT:         vllm.silu_and_mul %a up(%b
func.func @silu_two_operands(%x: tensor<8x128xf16>) -> (tensor<8x64xf16>, tensor<4x128xf16>) {
  %g, %u = torch.call "aten::split.Tensor"(%x) [#torch.operand<0>, 64 : i64, -1 : i64] : (tensor<8x128xf16>) -> (tensor<8x64xf16>, tensor<8x64xf16>)
  %s = torch.call "aten::silu.default"(%u) [#torch.operand<0>] : (tensor<8x64xf16>) -> tensor<8x64xf16>
  %m = torch.call "aten::mul.Tensor"(%s, %g) [#torch.operand<0>, #torch.operand<1>] : (tensor<8x64xf16>, tensor<8x64xf16>) -> tensor<8x64xf16>
  %a, %b = torch.call "aten::split.Tensor"(%x) [#torch.operand<0>, 4 : i64, 0 : i64] : (tensor<8x128xf16>) -> (tensor<4x128xf16>, tensor<4x128xf16>)
  %sa = torch.call "aten::silu.default"(%a) [#torch.operand<0>] : (tensor<4x128xf16>) -> tensor<4x128xf16>
  %m2 = torch.call "aten::mul.Tensor"(%sa, %b) [#torch.operand<0>, #torch.operand<1>] : (tensor<4x128xf16>, tensor<4x128xf16>) -> tensor<4x128xf16>
  func.return %m, %m2 : tensor<8x64xf16>, tensor<4x128xf16>
}

// HF Llama MLP in bf16 (gate_proj and up_proj, rank 3, dynamic dims) as AOTAutograd
// decomposes it: act_fn(gate) * up.
// CHECK-LABEL: func.func @hf_silu_two_operands
// CHECK-NEXT:    %[[M:.*]] = vllm.silu_and_mul %g up(%u : tensor<?x?x128xbf16>) : tensor<?x?x128xbf16> -> tensor<?x?x128xbf16>
// CHECK-NEXT:    func.return %[[M]]
// EXACT-LABEL: func.func @hf_silu_two_operands
// EXACT-NOT:     vllm.
// EXACT:         func.return
func.func @hf_silu_two_operands(%g: tensor<?x?x128xbf16>, %u: tensor<?x?x128xbf16>) -> tensor<?x?x128xbf16> {
  %gf = torch.call "prims::convert_element_type.default"(%g) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x?x128xbf16>) -> tensor<?x?x128xf32>
  %n = torch.call "aten::neg.default"(%gf) [#torch.operand<0>] : (tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %e = torch.call "aten::exp.default"(%n) [#torch.operand<0>] : (tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %a = torch.call "aten::add.Tensor"(%e) [#torch.operand<0>, 1 : i64] : (tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %sf = torch.call "aten::div.Tensor"(%gf, %a) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %s = torch.call "prims::convert_element_type.default"(%sf) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x?x128xf32>) -> tensor<?x?x128xbf16>
  %m = torch.call "aten::mul.Tensor"(%s, %u) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x?x128xbf16>, tensor<?x?x128xbf16>) -> tensor<?x?x128xbf16>
  func.return %m : tensor<?x?x128xbf16>
}

// Gemma's GeGLU (HF gelu_pytorch_tanh) in bf16, decomposed: gelu_tanh_and_mul.
// CHECK-LABEL: func.func @gemma_gelu_tanh
// CHECK-NEXT:    %[[M:.*]] = vllm.gelu_tanh_and_mul %g up(%u : tensor<?x128xbf16>) : tensor<?x128xbf16> -> tensor<?x128xbf16>
// CHECK-NEXT:    func.return %[[M]]
func.func @gemma_gelu_tanh(%g: tensor<?x128xbf16>, %u: tensor<?x128xbf16>) -> tensor<?x128xbf16> {
  %c = torch.call "prims::convert_element_type.default"(%g) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x128xbf16>) -> tensor<?x128xf32>
  %m1 = torch.call "aten::mul.Tensor"(%c) [#torch.operand<0>, #torch.operand<0>] : (tensor<?x128xf32>) -> tensor<?x128xf32>
  %m2 = torch.call "aten::mul.Tensor"(%m1, %c) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  %m3 = torch.call "aten::mul.Tensor"(%m2) [#torch.operand<0>, 4.471500e-02 : f64] : (tensor<?x128xf32>) -> tensor<?x128xf32>
  %a = torch.call "aten::add.Tensor"(%c, %m3) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  %m4 = torch.call "aten::mul.Tensor"(%a) [#torch.operand<0>, 0.79788456080286541 : f64] : (tensor<?x128xf32>) -> tensor<?x128xf32>
  %m5 = torch.call "aten::mul.Tensor"(%c) [#torch.operand<0>, 5.000000e-01 : f64] : (tensor<?x128xf32>) -> tensor<?x128xf32>
  %t = torch.call "aten::tanh.default"(%m4) [#torch.operand<0>] : (tensor<?x128xf32>) -> tensor<?x128xf32>
  %a1 = torch.call "aten::add.Tensor"(%t) [#torch.operand<0>, 1 : i64] : (tensor<?x128xf32>) -> tensor<?x128xf32>
  %m6 = torch.call "aten::mul.Tensor"(%m5, %a1) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  %r = torch.call "prims::convert_element_type.default"(%m6) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x128xf32>) -> tensor<?x128xbf16>
  %m = torch.call "aten::mul.Tensor"(%r, %u) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x128xbf16>, tensor<?x128xbf16>) -> tensor<?x128xbf16>
  func.return %m : tensor<?x128xbf16>
}

// Exact GELU decomposed in f32 (no casts), and aten.gelu on the halves of one tensor.
// CHECK-LABEL: func.func @gelu_erf
// CHECK-NEXT:    %[[M:.*]] = vllm.gelu_and_mul %g up(%u : tensor<4x?x64xf32>) : tensor<4x?x64xf32> -> tensor<4x?x64xf32>
// CHECK-NEXT:    %[[M2:.*]] = vllm.gelu_tanh_and_mul %x : tensor<?x128xf16> -> tensor<?x64xf16>
// CHECK-NEXT:    %[[M3:.*]] = vllm.gelu_and_mul %x : tensor<?x128xf16> -> tensor<?x64xf16>
// CHECK-NEXT:    func.return %[[M]], %[[M2]], %[[M3]]
func.func @gelu_erf(%g: tensor<4x?x64xf32>, %u: tensor<4x?x64xf32>, %x: tensor<?x128xf16>) -> (tensor<4x?x64xf32>, tensor<?x64xf16>, tensor<?x64xf16>) {
  %h = torch.call "aten::mul.Tensor"(%g) [#torch.operand<0>, 5.000000e-01 : f64] : (tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  %i = torch.call "aten::mul.Tensor"(%g) [#torch.operand<0>, 0.70710678118654757 : f64] : (tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  %e = torch.call "aten::erf.default"(%i) [#torch.operand<0>] : (tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  %a = torch.call "aten::add.Tensor"(%e) [#torch.operand<0>, 1 : i64] : (tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  %y = torch.call "aten::mul.Tensor"(%h, %a) [#torch.operand<0>, #torch.operand<1>] : (tensor<4x?x64xf32>, tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  %m = torch.call "aten::mul.Tensor"(%u, %y) [#torch.operand<0>, #torch.operand<1>] : (tensor<4x?x64xf32>, tensor<4x?x64xf32>) -> tensor<4x?x64xf32>
  %p, %q = torch.call "aten::split.Tensor"(%x) [#torch.operand<0>, 64 : i64, -1 : i64] : (tensor<?x128xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>)
  %t = torch.call "aten::gelu.default"(%p) [#torch.operand<0>] kwargs {approximate = "tanh"} : (tensor<?x64xf16>) -> tensor<?x64xf16>
  %m2 = torch.call "aten::mul.Tensor"(%t, %q) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf16>, tensor<?x64xf16>) -> tensor<?x64xf16>
  %n = torch.call "aten::gelu.default"(%p) [#torch.operand<0>] : (tensor<?x64xf16>) -> tensor<?x64xf16>
  %m3 = torch.call "aten::mul.Tensor"(%n, %q) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf16>, tensor<?x64xf16>) -> tensor<?x64xf16>
  func.return %m, %m2, %m3 : tensor<4x?x64xf32>, tensor<?x64xf16>, tensor<?x64xf16>
}

// Negatives: SiLU in f32 multiplied without rounding back (an f32 result, not the
// contract), a broadcasting product, a GELU with another constant (not torch's formula),
// a tanh GELU whose cubic term is x^2 (not x^3).
// CHECK-LABEL: func.func @neg_act
// CHECK-NOT:     vllm.
// CHECK:         func.return
func.func @neg_act(%x: tensor<8x128xf16>, %b: tensor<1x64xf16>, %g: tensor<?x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf16>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %p, %u = torch.call "aten::split.Tensor"(%x) [#torch.operand<0>, 64 : i64, -1 : i64] : (tensor<8x128xf16>) -> (tensor<8x64xf16>, tensor<8x64xf16>)
  %gf = torch.call "prims::convert_element_type.default"(%p) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<8x64xf16>) -> tensor<8x64xf32>
  %sg = torch.call "aten::sigmoid.default"(%gf) [#torch.operand<0>] : (tensor<8x64xf32>) -> tensor<8x64xf32>
  %sf = torch.call "aten::mul.Tensor"(%gf, %sg) [#torch.operand<0>, #torch.operand<1>] : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %m3 = torch.call "aten::mul.Tensor"(%sf, %u) [#torch.operand<0>, #torch.operand<1>] : (tensor<8x64xf32>, tensor<8x64xf16>) -> tensor<8x64xf32>
  %s = torch.call "aten::silu.default"(%p) [#torch.operand<0>] : (tensor<8x64xf16>) -> tensor<8x64xf16>
  %mb = torch.call "aten::mul.Tensor"(%s, %b) [#torch.operand<0>, #torch.operand<1>] : (tensor<8x64xf16>, tensor<1x64xf16>) -> tensor<8x64xf16>
  %h = torch.call "aten::mul.Tensor"(%g) [#torch.operand<0>, 5.000000e-01 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %i = torch.call "aten::mul.Tensor"(%g) [#torch.operand<0>, 0.7 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %e = torch.call "aten::erf.default"(%i) [#torch.operand<0>] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %a = torch.call "aten::add.Tensor"(%e) [#torch.operand<0>, 1 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %y = torch.call "aten::mul.Tensor"(%h, %a) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %m = torch.call "aten::mul.Tensor"(%y, %g) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %sq = torch.call "aten::mul.Tensor"(%g) [#torch.operand<0>, #torch.operand<0>] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %c3 = torch.call "aten::mul.Tensor"(%sq) [#torch.operand<0>, 4.471500e-02 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %ad = torch.call "aten::add.Tensor"(%g, %c3) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %k = torch.call "aten::mul.Tensor"(%ad) [#torch.operand<0>, 0.79788456080286541 : f64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %t = torch.call "aten::tanh.default"(%k) [#torch.operand<0>] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %t1 = torch.call "aten::add.Tensor"(%t) [#torch.operand<0>, 1 : i64] : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %yt = torch.call "aten::mul.Tensor"(%h, %t1) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %mt = torch.call "aten::mul.Tensor"(%yt, %g) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  func.return %m3, %mb, %m, %mt : tensor<8x64xf32>, tensor<8x64xf16>, tensor<?x64xf32>, tensor<?x64xf32>
}

// ----- clean-up ------------------------------------------------------------------------------

// The dead decomposition is erased, but an unused call that mutates or that is not a known
// functional op stays (and so does the chunk it reads). aten.chunk is a split too.
// CHECK-LABEL: func.func @cleanup
// CHECK-NEXT:    torch.call "aten::chunk.default"
// CHECK-NEXT:    %[[M:.*]] = vllm.silu_and_mul %x : tensor<4x128xf32> -> tensor<4x64xf32>
// CHECK-NEXT:    torch.call "aten::copy_.default"
// CHECK-NEXT:    torch.call "mylib::opaque.default"
// CHECK-NEXT:    func.return %[[M]]
func.func @cleanup(%x: tensor<4x128xf32>, %buf: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %g, %u = torch.call "aten::chunk.default"(%x) [#torch.operand<0>, 2 : i64, -1 : i64] : (tensor<4x128xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>)
  %s = torch.call "aten::silu.default"(%g) [#torch.operand<0>] : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %m = torch.call "aten::mul.Tensor"(%s, %u) [#torch.operand<0>, #torch.operand<1>] : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %c = torch.call "aten::copy_.default"(%buf, %g) [#torch.operand<0>, #torch.operand<1>] : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %o = torch.call "mylib::opaque.default"(%u) [#torch.operand<0>] : (tensor<4x64xf32>) -> tensor<4x64xf32>
  func.return %m : tensor<4x64xf32>
}
