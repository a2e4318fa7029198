"""Autotuned dispatch: `auto` in a priority list picks, per shape bucket, the fastest
implementation whose results meet the contract, measured on the device.

    VLLM_XDSL_PRIORITY=auto python app.py          # every op
    ops.set_priority("rms_norm=auto")              # eager calls tune their bucket once
    vllm-opt --lower-dispatch="target=cpu priority=auto" in.mlir   # runtime selection op
    python -m vllm_xdsl.tune model.mlir --target cpu   |   python -m vllm_xdsl.tune --show

Environment: VLLM_XDSL_TUNE_BUDGET (seconds per tuning call, default 60),
VLLM_XDSL_TUNE_MAX_TOKENS (largest bucket, default 4096; larger counts use it),
VLLM_XDSL_TUNE_TABLE (a table tuned elsewhere, e.g. `--show --json` on the GPU machine),
VLLM_XDSL_CACHE_DIR (else $XDG_CACHE_HOME/vllm_xdsl, else ~/.cache/vllm_xdsl).

Buckets: bucket.py; timing: measure.py; tuning: tuner.py; the cache file: cache.py; the
hooks of `auto` (installed through this package's `vllm_xdsl.providers` entry point): auto.py.
The runtime selection torch ops are a backend: vllm_xdsl/backends/auto/torch_ops.py.
"""

from vllm_xdsl.tune.auto import AutoChoice, auto_decision, tune_call
from vllm_xdsl.tune.bucket import Bucket, bucket_of, token_bucket
from vllm_xdsl.tune.tuner import STATS, BucketResult, Table

__all__ = ["STATS", "AutoChoice", "Bucket", "BucketResult", "Table", "auto_decision",
           "bucket_of", "token_bucket", "tune_call"]
