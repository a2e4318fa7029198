// One Llama decoder layer (hidden 4096, 32 heads, intermediate 14336, bf16) whose linear
// inputs are fp8 static-quantized, as the vllm_xdsl torch.compile backend sees it after
// `raise-native`: HF-style RMSNorms, fp8 quants and SiLU-and-mul are `vllm` ops, the rest
// (attention, matmuls, RoPE) opaque `torch.call`s. The token dimension is `?`.
// Generated from vllm_xdsl.models.DecoderLayer (torch.compile with mark_dynamic on the
// tokens, frontend.import_graph, the raise-native pass). Try (from a checkout; for an
// installed copy, `python -m vllm_xdsl.examples llama_decoder_layer` prints its path):
//   vllm-opt --fuse-norm-quant --lower-dispatch=target=cpu vllm_xdsl/examples/llama_decoder_layer.mlir
//   vllm-opt --fuse-norm-quant --lower-dispatch="target=cuda report=true" vllm_xdsl/examples/llama_decoder_layer.mlir
builtin.module {
  func.func @forward(%arg0: i64, %arg1: tensor<?x4096xbf16>, %arg2: tensor<4096xbf16>, %arg3: tensor<1xbf16>, %arg4: tensor<12288x4096xbf16>, %arg5: tensor<64xbf16>, %arg6: tensor<1xbf16>, %arg7: tensor<4096x4096xbf16>, %arg8: tensor<4096xbf16>, %arg9: tensor<1xbf16>, %arg10: tensor<28672x4096xbf16>, %arg11: tensor<1xbf16>, %arg12: tensor<4096x14336xbf16>) -> tensor<?x4096xbf16> {
    %mul = vllm.rms_norm %arg1 weight(%arg2 : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
    %convert_element_type = torch.call "prims::convert_element_type.default"(%arg3) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<1xbf16>) -> tensor<1xf32>
    %convert_element_type_1 = vllm.static_scaled_fp8_quant %mul, %convert_element_type : tensor<?x4096xbf16>, tensor<1xf32> -> tensor<?x4096xf8E4M3FN>
    %convert_element_type_2 = torch.call "prims::convert_element_type.default"(%convert_element_type_1) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x4096xf8E4M3FN>) -> tensor<?x4096xf32>
    %mul_1 = torch.call "aten::mul.Tensor"(%convert_element_type_2, %convert_element_type) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xf32>, tensor<1xf32>) -> tensor<?x4096xf32>
    %convert_element_type_3 = torch.call "prims::convert_element_type.default"(%mul_1) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x4096xf32>) -> tensor<?x4096xbf16>
    %permute = torch.call "aten::permute.default"(%arg4) [#torch.operand<0>, [1 : i64, 0 : i64]] : (tensor<12288x4096xbf16>) -> tensor<4096x12288xbf16>
    %mm = torch.call "aten::mm.default"(%convert_element_type_3, %permute) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xbf16>, tensor<4096x12288xbf16>) -> tensor<?x12288xbf16>
    %view = torch.call "aten::view.default"(%mm, %arg0) [#torch.operand<0>, [#torch.operand<1>, 3 : i64, 32 : i64, 128 : i64]] : (tensor<?x12288xbf16>, i64) -> tensor<?x3x32x128xbf16>
    %unbind, %unbind_1, %unbind_2 = torch.call "aten::unbind.int"(%view) [#torch.operand<0>, 1 : i64] : (tensor<?x3x32x128xbf16>) -> (tensor<?x32x128xbf16>, tensor<?x32x128xbf16>, tensor<?x32x128xbf16>)
    %iota = torch.call "prims::iota.default"(%arg0) [#torch.operand<0>] kwargs {start = 0 : i64, step = 1 : i64, dtype = #torch.dtype<i64>, device = #torch.device<"cpu">, requires_grad = false} : (i64) -> tensor<?xi64>
    %convert_element_type_4 = torch.call "prims::convert_element_type.default"(%iota) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?xi64>) -> tensor<?xf32>
    %view_1 = torch.call "aten::view.default"(%convert_element_type_4, %arg0) [#torch.operand<0>, [#torch.operand<1>, 1 : i64]] : (tensor<?xf32>, i64) -> tensor<?x1xf32>
    %mul_2 = torch.call "aten::mul.Tensor"(%view_1, %arg5) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x1xf32>, tensor<64xbf16>) -> tensor<?x64xf32>
    %unsqueeze = torch.call "aten::unsqueeze.default"(%mul_2) [#torch.operand<0>, 1 : i64] : (tensor<?x64xf32>) -> tensor<?x1x64xf32>
    %expand = torch.call "aten::expand.default"(%unsqueeze, %arg0) [#torch.operand<0>, [#torch.operand<1>, 2 : i64, 64 : i64]] : (tensor<?x1x64xf32>, i64) -> tensor<?x2x64xf32>
    %clone = torch.call "aten::clone.default"(%expand) [#torch.operand<0>] kwargs {memory_format = #torch.enum<"torch.contiguous_format">} : (tensor<?x2x64xf32>) -> tensor<?x2x64xf32>
    %view_2 = torch.call "aten::view.default"(%clone, %arg0) [#torch.operand<0>, [#torch.operand<1>, 128 : i64]] : (tensor<?x2x64xf32>, i64) -> tensor<?x128xf32>
    %clone_1 = torch.call "aten::clone.default"(%view_2) [#torch.operand<0>] : (tensor<?x128xf32>) -> tensor<?x128xf32>
    %cos = torch.call "aten::cos.default"(%clone_1) [#torch.operand<0>] : (tensor<?x128xf32>) -> tensor<?x128xf32>
    %convert_element_type_5 = torch.call "prims::convert_element_type.default"(%cos) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x128xf32>) -> tensor<?x128xbf16>
    %slice = torch.call "aten::slice.Tensor"(%convert_element_type_5) [#torch.operand<0>, 0 : i64, 0 : i64, 9223372036854775807 : i64] : (tensor<?x128xbf16>) -> tensor<?x128xbf16>
    %unsqueeze_1 = torch.call "aten::unsqueeze.default"(%slice) [#torch.operand<0>, 1 : i64] : (tensor<?x128xbf16>) -> tensor<?x1x128xbf16>
    %sin = torch.call "aten::sin.default"(%clone_1) [#torch.operand<0>] : (tensor<?x128xf32>) -> tensor<?x128xf32>
    %convert_element_type_6 = torch.call "prims::convert_element_type.default"(%sin) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x128xf32>) -> tensor<?x128xbf16>
    %slice_1 = torch.call "aten::slice.Tensor"(%convert_element_type_6) [#torch.operand<0>, 0 : i64, 0 : i64, 9223372036854775807 : i64] : (tensor<?x128xbf16>) -> tensor<?x128xbf16>
    %unsqueeze_2 = torch.call "aten::unsqueeze.default"(%slice_1) [#torch.operand<0>, 1 : i64] : (tensor<?x128xbf16>) -> tensor<?x1x128xbf16>
    %mul_3 = torch.call "aten::mul.Tensor"(%unbind, %unsqueeze_1) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x32x128xbf16>, tensor<?x1x128xbf16>) -> tensor<?x32x128xbf16>
    %split, %split_1 = torch.call "aten::split.Tensor"(%unbind) [#torch.operand<0>, 64 : i64, -1 : i64] : (tensor<?x32x128xbf16>) -> (tensor<?x32x64xbf16>, tensor<?x32x64xbf16>)
    %neg = torch.call "aten::neg.default"(%split_1) [#torch.operand<0>] : (tensor<?x32x64xbf16>) -> tensor<?x32x64xbf16>
    %cat = torch.call "aten::cat.default"(%neg, %split) [[#torch.operand<0>, #torch.operand<1>], -1 : i64] : (tensor<?x32x64xbf16>, tensor<?x32x64xbf16>) -> tensor<?x32x128xbf16>
    %mul_4 = torch.call "aten::mul.Tensor"(%cat, %unsqueeze_2) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x32x128xbf16>, tensor<?x1x128xbf16>) -> tensor<?x32x128xbf16>
    %add = torch.call "aten::add.Tensor"(%mul_3, %mul_4) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x32x128xbf16>, tensor<?x32x128xbf16>) -> tensor<?x32x128xbf16>
    %mul_5 = torch.call "aten::mul.Tensor"(%unbind_1, %unsqueeze_1) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x32x128xbf16>, tensor<?x1x128xbf16>) -> tensor<?x32x128xbf16>
    %split_2, %split_3 = torch.call "aten::split.Tensor"(%unbind_1) [#torch.operand<0>, 64 : i64, -1 : i64] : (tensor<?x32x128xbf16>) -> (tensor<?x32x64xbf16>, tensor<?x32x64xbf16>)
    %neg_1 = torch.call "aten::neg.default"(%split_3) [#torch.operand<0>] : (tensor<?x32x64xbf16>) -> tensor<?x32x64xbf16>
    %cat_1 = torch.call "aten::cat.default"(%neg_1, %split_2) [[#torch.operand<0>, #torch.operand<1>], -1 : i64] : (tensor<?x32x64xbf16>, tensor<?x32x64xbf16>) -> tensor<?x32x128xbf16>
    %mul_6 = torch.call "aten::mul.Tensor"(%cat_1, %unsqueeze_2) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x32x128xbf16>, tensor<?x1x128xbf16>) -> tensor<?x32x128xbf16>
    %add_1 = torch.call "aten::add.Tensor"(%mul_5, %mul_6) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x32x128xbf16>, tensor<?x32x128xbf16>) -> tensor<?x32x128xbf16>
    %permute_1 = torch.call "aten::permute.default"(%add) [#torch.operand<0>, [1 : i64, 0 : i64, 2 : i64]] : (tensor<?x32x128xbf16>) -> tensor<32x?x128xbf16>
    %permute_2 = torch.call "aten::permute.default"(%add_1) [#torch.operand<0>, [1 : i64, 0 : i64, 2 : i64]] : (tensor<?x32x128xbf16>) -> tensor<32x?x128xbf16>
    %permute_3 = torch.call "aten::permute.default"(%unbind_2) [#torch.operand<0>, [1 : i64, 0 : i64, 2 : i64]] : (tensor<?x32x128xbf16>) -> tensor<32x?x128xbf16>
    %convert_element_type_7 = torch.call "prims::convert_element_type.default"(%permute_1) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<32x?x128xbf16>) -> tensor<32x?x128xf32>
    %convert_element_type_8 = torch.call "prims::convert_element_type.default"(%permute_2) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<32x?x128xbf16>) -> tensor<32x?x128xf32>
    %convert_element_type_9 = torch.call "prims::convert_element_type.default"(%permute_3) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<32x?x128xbf16>) -> tensor<32x?x128xf32>
    %mul_7 = torch.call "aten::mul.Scalar"(%convert_element_type_7) [#torch.operand<0>, 0.29730177875068026 : f64] : (tensor<32x?x128xf32>) -> tensor<32x?x128xf32>
    %full = torch.call "aten::full.default"(%arg0) [[#torch.operand<0>, #torch.operand<0>], true] kwargs {dtype = #torch.dtype<i1>, layout = #torch.enum<"torch.strided">, device = #torch.device<"cpu">, pin_memory = false} : (i64) -> tensor<?x?xi1>
    %iota_1 = torch.call "prims::iota.default"(%arg0) [#torch.operand<0>] kwargs {start = 0 : i64, step = 1 : i64, dtype = #torch.dtype<i64>, device = #torch.device<"cpu">, requires_grad = false} : (i64) -> tensor<?xi64>
    %unsqueeze_3 = torch.call "aten::unsqueeze.default"(%iota_1) [#torch.operand<0>, -2 : i64] : (tensor<?xi64>) -> tensor<1x?xi64>
    %iota_2 = torch.call "prims::iota.default"(%arg0) [#torch.operand<0>] kwargs {start = 0 : i64, step = 1 : i64, dtype = #torch.dtype<i64>, device = #torch.device<"cpu">, requires_grad = false} : (i64) -> tensor<?xi64>
    %unsqueeze_4 = torch.call "aten::unsqueeze.default"(%iota_2) [#torch.operand<0>, -1 : i64] : (tensor<?xi64>) -> tensor<?x1xi64>
    %sub = torch.call "aten::sub.Tensor"(%unsqueeze_3, %unsqueeze_4) [#torch.operand<0>, #torch.operand<1>] : (tensor<1x?xi64>, tensor<?x1xi64>) -> tensor<?x?xi64>
    %le = torch.call "aten::le.Scalar"(%sub) [#torch.operand<0>, 0 : i64] : (tensor<?x?xi64>) -> tensor<?x?xi1>
    %logical_and = torch.call "aten::logical_and.default"(%le, %full) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x?xi1>, tensor<?x?xi1>) -> tensor<?x?xi1>
    %scalar_tensor = torch.call "aten::scalar_tensor.default"() [0xfff0000000000000 : f64] kwargs {dtype = #torch.dtype<f32>, device = #torch.device<"cpu">} : () -> tensor<f32>
    %scalar_tensor_1 = torch.call "aten::scalar_tensor.default"() [0.000000e+00 : f64] kwargs {dtype = #torch.dtype<f32>, layout = #torch.enum<"torch.strided">, device = #torch.device<"cpu">} : () -> tensor<f32>
    %where = torch.call "aten::where.self"(%logical_and, %scalar_tensor_1, %scalar_tensor) [#torch.operand<0>, #torch.operand<1>, #torch.operand<2>] : (tensor<?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?xf32>
    %permute_4 = torch.call "aten::permute.default"(%convert_element_type_8) [#torch.operand<0>, [0 : i64, 2 : i64, 1 : i64]] : (tensor<32x?x128xf32>) -> tensor<32x128x?xf32>
    %mul_8 = torch.call "aten::mul.Scalar"(%permute_4) [#torch.operand<0>, 0.29730177875068026 : f64] : (tensor<32x128x?xf32>) -> tensor<32x128x?xf32>
    %expand_1 = torch.call "aten::expand.default"(%mul_7, %arg0) [#torch.operand<0>, [32 : i64, #torch.operand<1>, 128 : i64]] : (tensor<32x?x128xf32>, i64) -> tensor<32x?x128xf32>
    %view_3 = torch.call "aten::view.default"(%expand_1, %arg0) [#torch.operand<0>, [32 : i64, #torch.operand<1>, 128 : i64]] : (tensor<32x?x128xf32>, i64) -> tensor<32x?x128xf32>
    %expand_2 = torch.call "aten::expand.default"(%mul_8, %arg0) [#torch.operand<0>, [32 : i64, 128 : i64, #torch.operand<1>]] : (tensor<32x128x?xf32>, i64) -> tensor<32x128x?xf32>
    %view_4 = torch.call "aten::view.default"(%expand_2, %arg0) [#torch.operand<0>, [32 : i64, 128 : i64, #torch.operand<1>]] : (tensor<32x128x?xf32>, i64) -> tensor<32x128x?xf32>
    %bmm = torch.call "aten::bmm.default"(%view_3, %view_4) [#torch.operand<0>, #torch.operand<1>] : (tensor<32x?x128xf32>, tensor<32x128x?xf32>) -> tensor<32x?x?xf32>
    %view_5 = torch.call "aten::view.default"(%bmm, %arg0) [#torch.operand<0>, [32 : i64, #torch.operand<1>, #torch.operand<1>]] : (tensor<32x?x?xf32>, i64) -> tensor<32x?x?xf32>
    %add_2 = torch.call "aten::add.Tensor"(%view_5, %where) [#torch.operand<0>, #torch.operand<1>] : (tensor<32x?x?xf32>, tensor<?x?xf32>) -> tensor<32x?x?xf32>
    %amax = torch.call "aten::amax.default"(%add_2) [#torch.operand<0>, [-1 : i64], true] : (tensor<32x?x?xf32>) -> tensor<32x?x1xf32>
    %sub_1 = torch.call "aten::sub.Tensor"(%add_2, %amax) [#torch.operand<0>, #torch.operand<1>] : (tensor<32x?x?xf32>, tensor<32x?x1xf32>) -> tensor<32x?x?xf32>
    %exp = torch.call "aten::exp.default"(%sub_1) [#torch.operand<0>] : (tensor<32x?x?xf32>) -> tensor<32x?x?xf32>
    %sum = torch.call "aten::sum.dim_IntList"(%exp) [#torch.operand<0>, [-1 : i64], true] : (tensor<32x?x?xf32>) -> tensor<32x?x1xf32>
    %div = torch.call "aten::div.Tensor"(%exp, %sum) [#torch.operand<0>, #torch.operand<1>] : (tensor<32x?x?xf32>, tensor<32x?x1xf32>) -> tensor<32x?x?xf32>
    %eq = torch.call "aten::eq.Scalar"(%add_2) [#torch.operand<0>, 0xfff0000000000000 : f64] : (tensor<32x?x?xf32>) -> tensor<32x?x?xi1>
    %logical_not = torch.call "aten::logical_not.default"(%eq) [#torch.operand<0>] : (tensor<32x?x?xi1>) -> tensor<32x?x?xi1>
    %any = torch.call "aten::any.dim"(%logical_not) [#torch.operand<0>, -1 : i64, true] : (tensor<32x?x?xi1>) -> tensor<32x?x1xi1>
    %logical_not_1 = torch.call "aten::logical_not.default"(%any) [#torch.operand<0>] : (tensor<32x?x1xi1>) -> tensor<32x?x1xi1>
    %full_1 = torch.call "aten::full.default"(%arg0) [[32 : i64, #torch.operand<0>, #torch.operand<0>], 0 : i64] kwargs {dtype = #torch.dtype<f32>, layout = #torch.enum<"torch.strided">, device = #torch.device<"cpu">, pin_memory = false} : (i64) -> tensor<32x?x?xf32>
    %where_1 = torch.call "aten::where.self"(%logical_not_1, %full_1, %div) [#torch.operand<0>, #torch.operand<1>, #torch.operand<2>] : (tensor<32x?x1xi1>, tensor<32x?x?xf32>, tensor<32x?x?xf32>) -> tensor<32x?x?xf32>
    %expand_3 = torch.call "aten::expand.default"(%where_1, %arg0) [#torch.operand<0>, [32 : i64, #torch.operand<1>, #torch.operand<1>]] : (tensor<32x?x?xf32>, i64) -> tensor<32x?x?xf32>
    %view_6 = torch.call "aten::view.default"(%expand_3, %arg0) [#torch.operand<0>, [32 : i64, #torch.operand<1>, #torch.operand<1>]] : (tensor<32x?x?xf32>, i64) -> tensor<32x?x?xf32>
    %expand_4 = torch.call "aten::expand.default"(%convert_element_type_9, %arg0) [#torch.operand<0>, [32 : i64, #torch.operand<1>, 128 : i64]] : (tensor<32x?x128xf32>, i64) -> tensor<32x?x128xf32>
    %view_7 = torch.call "aten::view.default"(%expand_4, %arg0) [#torch.operand<0>, [32 : i64, #torch.operand<1>, 128 : i64]] : (tensor<32x?x128xf32>, i64) -> tensor<32x?x128xf32>
    %bmm_1 = torch.call "aten::bmm.default"(%view_6, %view_7) [#torch.operand<0>, #torch.operand<1>] : (tensor<32x?x?xf32>, tensor<32x?x128xf32>) -> tensor<32x?x128xf32>
    %view_8 = torch.call "aten::view.default"(%bmm_1, %arg0) [#torch.operand<0>, [32 : i64, #torch.operand<1>, 128 : i64]] : (tensor<32x?x128xf32>, i64) -> tensor<32x?x128xf32>
    %convert_element_type_10 = torch.call "prims::convert_element_type.default"(%view_8) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<32x?x128xf32>) -> tensor<32x?x128xbf16>
    %permute_5 = torch.call "aten::permute.default"(%convert_element_type_10) [#torch.operand<0>, [1 : i64, 0 : i64, 2 : i64]] : (tensor<32x?x128xbf16>) -> tensor<?x32x128xbf16>
    %clone_2 = torch.call "aten::clone.default"(%permute_5) [#torch.operand<0>] kwargs {memory_format = #torch.enum<"torch.contiguous_format">} : (tensor<?x32x128xbf16>) -> tensor<?x32x128xbf16>
    %view_9 = torch.call "aten::view.default"(%clone_2, %arg0) [#torch.operand<0>, [#torch.operand<1>, 4096 : i64]] : (tensor<?x32x128xbf16>, i64) -> tensor<?x4096xbf16>
    %convert_element_type_11 = torch.call "prims::convert_element_type.default"(%arg6) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<1xbf16>) -> tensor<1xf32>
    %convert_element_type_12 = vllm.static_scaled_fp8_quant %view_9, %convert_element_type_11 : tensor<?x4096xbf16>, tensor<1xf32> -> tensor<?x4096xf8E4M3FN>
    %convert_element_type_13 = torch.call "prims::convert_element_type.default"(%convert_element_type_12) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x4096xf8E4M3FN>) -> tensor<?x4096xf32>
    %mul_9 = torch.call "aten::mul.Tensor"(%convert_element_type_13, %convert_element_type_11) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xf32>, tensor<1xf32>) -> tensor<?x4096xf32>
    %convert_element_type_14 = torch.call "prims::convert_element_type.default"(%mul_9) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x4096xf32>) -> tensor<?x4096xbf16>
    %permute_6 = torch.call "aten::permute.default"(%arg7) [#torch.operand<0>, [1 : i64, 0 : i64]] : (tensor<4096x4096xbf16>) -> tensor<4096x4096xbf16>
    %mm_1 = torch.call "aten::mm.default"(%convert_element_type_14, %permute_6) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16>
    %add_3 = torch.call "aten::add.Tensor"(%arg1, %mm_1) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xbf16>, tensor<?x4096xbf16>) -> tensor<?x4096xbf16>
    %mul_10 = vllm.rms_norm %add_3 weight(%arg8 : tensor<4096xbf16>) {epsilon = 1.000000e-05 : f64} : tensor<?x4096xbf16> -> tensor<?x4096xbf16>
    %convert_element_type_15 = torch.call "prims::convert_element_type.default"(%arg9) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<1xbf16>) -> tensor<1xf32>
    %convert_element_type_16 = vllm.static_scaled_fp8_quant %mul_10, %convert_element_type_15 : tensor<?x4096xbf16>, tensor<1xf32> -> tensor<?x4096xf8E4M3FN>
    %convert_element_type_17 = torch.call "prims::convert_element_type.default"(%convert_element_type_16) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x4096xf8E4M3FN>) -> tensor<?x4096xf32>
    %mul_11 = torch.call "aten::mul.Tensor"(%convert_element_type_17, %convert_element_type_15) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xf32>, tensor<1xf32>) -> tensor<?x4096xf32>
    %convert_element_type_18 = torch.call "prims::convert_element_type.default"(%mul_11) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x4096xf32>) -> tensor<?x4096xbf16>
    %permute_7 = torch.call "aten::permute.default"(%arg10) [#torch.operand<0>, [1 : i64, 0 : i64]] : (tensor<28672x4096xbf16>) -> tensor<4096x28672xbf16>
    %mm_2 = torch.call "aten::mm.default"(%convert_element_type_18, %permute_7) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xbf16>, tensor<4096x28672xbf16>) -> tensor<?x28672xbf16>
    %mul_12 = vllm.silu_and_mul %mm_2 : tensor<?x28672xbf16> -> tensor<?x14336xbf16>
    %convert_element_type_19 = torch.call "prims::convert_element_type.default"(%arg11) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<1xbf16>) -> tensor<1xf32>
    %convert_element_type_20 = vllm.static_scaled_fp8_quant %mul_12, %convert_element_type_19 : tensor<?x14336xbf16>, tensor<1xf32> -> tensor<?x14336xf8E4M3FN>
    %convert_element_type_21 = torch.call "prims::convert_element_type.default"(%convert_element_type_20) [#torch.operand<0>, #torch.dtype<f32>] : (tensor<?x14336xf8E4M3FN>) -> tensor<?x14336xf32>
    %mul_13 = torch.call "aten::mul.Tensor"(%convert_element_type_21, %convert_element_type_19) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x14336xf32>, tensor<1xf32>) -> tensor<?x14336xf32>
    %convert_element_type_22 = torch.call "prims::convert_element_type.default"(%mul_13) [#torch.operand<0>, #torch.dtype<bf16>] : (tensor<?x14336xf32>) -> tensor<?x14336xbf16>
    %permute_8 = torch.call "aten::permute.default"(%arg12) [#torch.operand<0>, [1 : i64, 0 : i64]] : (tensor<4096x14336xbf16>) -> tensor<14336x4096xbf16>
    %mm_3 = torch.call "aten::mm.default"(%convert_element_type_22, %permute_8) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x14336xbf16>, tensor<14336x4096xbf16>) -> tensor<?x4096xbf16>
    %add_4 = torch.call "aten::add.Tensor"(%add_3, %mm_3) [#torch.operand<0>, #torch.operand<1>] : (tensor<?x4096xbf16>, tensor<?x4096xbf16>) -> tensor<?x4096xbf16>
    func.return %add_4 : tensor<?x4096xbf16>
  }
}
