"""The core layer is torch-free and xDSL-free: importing it loads neither."""

import subprocess
import sys


def test_core_imports_no_torch_or_xdsl() -> None:
    code = (
        "import sys\n"
        "import vllm_xdsl.core, vllm_xdsl.core.dtypes, vllm_xdsl.core.scheme\n"
        "import vllm_xdsl.core.variant, vllm_xdsl.core.catalog\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'xdsl'))\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"vllm_xdsl.core imported {out.stdout.strip()}"
