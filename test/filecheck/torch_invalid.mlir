// RUN: vllm-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @unqualified(%a: tensor<4xf32>) {
  %s = torch.call "add"(%a) [#torch.operand<0>] : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: 'torch.call' op target must be a qualified overload name like 'aten::add.Tensor', got 'add'

// -----

func.func @dangling_operand(%a: tensor<4xf32>) {
  %s = torch.call "aten::neg.default"(%a) [#torch.operand<1>] : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: 'torch.call' op #torch.operand<1> refers past the 1 operands of aten::neg.default

// -----

func.func @unused_operand(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %s = torch.call "aten::neg.default"(%a, %b) [#torch.operand<0>] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: 'torch.call' op operands [1] of aten::neg.default are not used by args or kwargs

// -----

func.func @unknown_op(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %s = torch.call "aten::mull.Tensor"(%a, %b) [#torch.operand<0>, #torch.operand<1>] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: 'torch.call' op unknown torch op 'aten::mull.Tensor': torch has no op aten::mull

// -----

func.func @unknown_overload(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  %s = torch.call "aten::mul.Tensorr"(%a, %b) [#torch.operand<0>, #torch.operand<1>] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: 'torch.call' op unknown torch op 'aten::mul.Tensorr': aten::mul has no overload 'Tensorr'

// -----

func.func @unknown_higher_order(%a: tensor<4xf32>) {
  %s = torch.call "higher_order::auto_functionalizd"(%a) [#torch.operand<0>] : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: 'torch.call' op unknown torch op 'higher_order::auto_functionalizd': torch has no higher-order op 'auto_functionalizd'
