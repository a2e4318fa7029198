"""The torch-free core: what each semantic op is, declared once.

Nothing here imports torch or xDSL (test_core_imports.py checks it), so every layer above
(ops, dialects, frontend, transforms, backends) can derive from it:

- `dtypes`: the element types the ops use (`DType`), fp8 / int8 ranges;
- `variant`: quant variants (`QuantVariant`, `parse_variant`);
- `scheme`: quant schemes (`QuantScheme`, `Granularity`, `DEFAULT_GROUP_EPS`);
- `catalog`: one `OpSpec` per semantic op (operands, results, properties, in-place map, the
  unfused ops a fused op composes, the activation, the native as a reference).
"""
