"""The core element types (vllm_xdsl.core.dtypes.DType) as torch dtypes."""

from __future__ import annotations

from functools import cache

import torch

from vllm_xdsl.core.dtypes import FP8, QUANT, DType


@cache
def to_torch(dtype: DType) -> torch.dtype:
    """The torch dtype of a core DType."""
    result = getattr(torch, DType.of(dtype).torch_name)
    assert isinstance(result, torch.dtype)
    return result


FP8_DTYPES: tuple[torch.dtype, ...] = tuple(to_torch(d) for d in FP8)
QUANT_DTYPES: tuple[torch.dtype, ...] = tuple(to_torch(d) for d in QUANT)
