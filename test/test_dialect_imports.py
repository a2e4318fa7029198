"""Importing a dialect registers no torch op and loads no torch: the dialects sit below the
ops layer's torch custom ops (DESIGN.md, "Layers import downward")."""

import subprocess
import sys

_PARSE_AND_VERIFY = '''
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.parser import Parser
from vllm_xdsl.dialects.vllm import Vllm
from vllm_xdsl.dialects.triton import Triton
ctx = Context()
for d in (Builtin, Func, Vllm, Triton):
    ctx.load_dialect(d)
Parser(ctx, """
func.func @f(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>, %s: tensor<1xf32>) {
  %q = vllm.rms_norm_quant %x weight(%w : tensor<64xbf16>) scale(%s : tensor<1xf32>)
         {epsilon = 1.0e-06 : f64, scheme = #vllm.quant<static per_tensor div quotient bf16>}
         : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>
  %g, %gs = triton.per_token_group_fp8_quant %x {group_size = 16 : i64, block_size = 64 : i64}
         : tensor<?x64xbf16> -> tensor<?x64xf8E4M3FN>, tensor<?x4xf32>
  %y, %ys = vllm.dynamic_per_token_scaled_int8_quant %x
         : tensor<?x64xbf16> -> tensor<?x64xi8>, tensor<?x1xf32>
  func.return
}
""").parse_module().verify()
'''


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_dialect_imports_load_no_ops_layer_and_no_torch() -> None:
    code = (
        "import sys\n"
        "import vllm_xdsl.dialects.vllm, vllm_xdsl.dialects.triton\n"
        "import vllm_xdsl.dialects.cuda, vllm_xdsl.dialects.rocm\n"
        "print(','.join(sorted(m for m in sys.modules\n"
        "               if m.split('.')[0] == 'torch' or m.startswith('vllm_xdsl.ops'))))\n"
    )
    assert _run(code) == "", "importing the dialects loaded: " + _run(code)


def test_parsing_and_verifying_quant_ops_needs_no_torch() -> None:
    code = _PARSE_AND_VERIFY + (
        "import sys\n"
        "print(','.join(sorted(m for m in sys.modules\n"
        "               if m.split('.')[0] == 'torch' or m.startswith('vllm_xdsl.ops'))))\n"
    )
    assert _run(code) == ""


def test_dialect_import_registers_no_torch_op() -> None:
    code = (
        "import vllm_xdsl.dialects.vllm\n"
        "import torch\n"
        "try:\n"
        "    torch.ops.vllm_xdsl.rms_norm\n"
        "    print('registered')\n"
        "except (AttributeError, RuntimeError):\n"
        "    print('absent')\n"
        "import vllm_xdsl.ops\n"
        "torch.ops.vllm_xdsl.rms_norm\n"  # the check can see a registered op
        "print('then registered')\n"
    )
    assert _run(code).split() == ["absent", "then", "registered"]
