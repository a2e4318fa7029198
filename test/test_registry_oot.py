"""An out-of-tree provider, installed as a real distribution with `vllm_xdsl.providers`
entry points, is loaded lazily and selected by eager dispatch.

The fixture package is pip-installed into a temporary --target directory (not into the
shared environment) and used from a subprocess, so its registrations cannot leak.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "oot_provider"

SCRIPT = r"""
import json, sys, warnings
import torch
from vllm_xdsl import ops
lazy = "vllm_xdsl_oot_demo" not in sys.modules  # importing ops loads no provider
x, w = torch.randn(3, 64), torch.randn(64)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ops.set_priority("oot_demo,native")
    out = ops.rms_norm(x, w, 1e-6)
    y = ops.silu_and_mul(torch.randn(2, 8))
import vllm_xdsl_oot_demo as demo
d64 = ops.rms_norm.explain(x.double(), w.double(), 1e-6)
print(json.dumps({
    "lazy": lazy,
    "calls": demo.CALLS,
    "equal": torch.equal(out, ops.rms_norm.native(x, w, 1e-6)),
    "chosen": ops.rms_norm.explain(x, w, 1e-6).provider,
    "d64": [d64.provider, d64.rejected],
    "has_oot": "oot_demo" in ops.registry.registered_providers(),
    "errors": ops.registry.load_errors(),
    "warnings": [str(c.message) for c in caught],
}))
"""


def test_entry_point_provider(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(FIXTURE, src)  # build outside the repo tree
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(src)],
        check=True, capture_output=True, timeout=300,
    )
    assert (next(target.glob("*.dist-info")) / "entry_points.txt").exists()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(target), os.environ.get("PYTHONPATH")]))}
    env.pop("VLLM_XDSL_PRIORITY", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["lazy"] is True
    assert r["calls"] == {"rms_norm": 1, "silu_and_mul": 1}
    assert r["equal"] and r["chosen"] == "oot_demo" and r["has_oot"]
    assert r["d64"] == ["native", [["oot_demo", "rejected the arguments"]]]
    assert len(r["errors"]) == 1 and "oot_broken" in r["errors"][0]
    assert "does_not_exist" in r["errors"][0]
    assert sum("oot_broken" in m for m in r["warnings"]) == 1
