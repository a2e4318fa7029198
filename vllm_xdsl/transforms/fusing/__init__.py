"""The `fuse-norm-quant` pass (fuse_norm_quant.py): a norm or act-and-mul op and the quant
of its output -> one fused op."""
