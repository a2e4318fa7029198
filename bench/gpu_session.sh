#!/usr/bin/env bash
# One GPU session, run as a single command on a machine with an NVIDIA GPU (the device
# lease gives minutes, not hours): GPU correctness first, then the kernel benchmark,
# autotuning, model latency and a decode profile. Every step has its own time limit and
# log, so one failing or slow step leaves the others' results; the limits of the serial
# steps add up to 590 s, under a device lease's 600 s per command. Logs go to $OUT/session.log, the benchmark table and plot to
# $OUT/kernels.{md,png} ($OUT defaults to /tmp/vllm_xdsl_gpu).
#
#   bash bench/gpu_session.sh            # needs this package importable, plus triton
#
# Where the package is not installed (a bare GPU machine without network), put its wheel
# and xDSL's in .whl/ first (bench/RESULTS.md says how; rebuild this package's wheel when
# its entry points change) and set VX_WHEELS=1.
set -u
OUT=${OUT:-/tmp/vllm_xdsl_gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export VLLM_XDSL_CACHE_DIR=${VLLM_XDSL_CACHE_DIR:-$PWD/.gpu/cache}
if [ "${VX_WHEELS:-0}" = 1 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/vx_site .whl/*.whl || exit 1
    export PYTHONPATH=$PWD:/tmp/vx_site  # the tree first: the wheel only adds entry points
fi

LOGS=$(mktemp -d)
# Everything lands in one file, $OUT/session.log (the device lease returns few files).
step() {  # step NAME SECONDS COMMAND...: run with a time limit; returns the command's status
    local name=$1 limit=$2 rc
    shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
    rc=$?
    echo "== $name: rc=$rc in $((SECONDS - t0)) s"
    tail -n 4 "$LOGS/$name.log"
    local lock=(flock "$LOGS")  # parallel steps append whole logs, one at a time
    command -v flock >/dev/null || lock=()
    "${lock[@]}" bash -c "{ echo '===== $name: rc=$rc in $((SECONDS - t0)) s'; \
        cat '$LOGS/$name.log'; } >>'$OUT/session.log'"
    return $rc
}

step env 20 bash -c 'nvidia-smi -L
    nvidia-smi --query-gpu=driver_version,clocks.max.sm,clocks.max.mem --format=csv
    python3 -c "import torch, triton, xdsl; print(\"torch\", torch.__version__, \"triton\",
triton.__version__, \"cuda\", torch.version.cuda)"
    nvcc --version | tail -n 2
    nproc'

# 0. Smoke test: one kernel of each backend and one compiled model. If this fails, stop
# here and keep the lease's remaining minutes for a fixed rerun.
step smoke 60 python3 - <<'PY' || exit 1
import torch
from vllm_xdsl import ops
from vllm_xdsl.ops.tolerance import contract_error
from vllm_xdsl.backends.triton.functions import FUNCTIONS
from vllm_xdsl.backends.cuda.torch_ops import launchers
from vllm_xdsl.backends.triton.conversion_check import mismatch
print("GPU conversions vs torch (conversion_check):", mismatch(torch.device("cuda"), hw=True) or "identical")
x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
args = (x, w, 1e-6, None, None, torch.float8_e4m3fn, False, "group", 128)
want = ops.ALL_OPS["rms_norm_quant"].native(*args)
for name, fn in (("triton", FUNCTIONS["rms_norm_quant"]),
                 ("cuda", launchers("cuda").rms_norm_quant)):
    got = fn(*args)  # runs; contract violations are reported (verify and bench judge them)
    for kind, g, e in zip(("value", "scales"), got, want):
        print(name, "rms_norm_quant[group128]", kind, contract_error(g.cpu(), e.cpu(), kind=kind) or "ok")
from vllm_xdsl.models import DecoderConfig, TinyDecoder
m = TinyDecoder(DecoderConfig(hidden=512, intermediate=1024, heads=8)).to(torch.bfloat16).cuda()
ids = torch.randint(0, 256, (33,), device="cuda")
with torch.no_grad():
    ref = m(ids)
    out = torch.compile(m, backend="vllm_xdsl", options={"strict": True})(ids)
print("compiled demo decoder max |diff| vs eager:", (out.float() - ref.float()).abs().max().item())
PY

# 1. Correctness on the GPU, in parallel (compilation is CPU-bound): the whole test suite,
# the contract check of each GPU provider, and the full grid of the op with the open
# scales question (issue 6).
step pytest 140 python3 -m pytest -q -rfE --maxfail 40 -n 12 --timeout 130 -p no:cacheprovider test &
step verify_triton 140 python3 -m vllm_xdsl.verify --provider triton &
step verify_cuda 140 python3 -m vllm_xdsl.verify --provider cuda &
step verify_full 140 python3 -m vllm_xdsl.verify --provider triton --full --op fused_add_rms_norm_quant &
step verify_emu 140 env VLLM_XDSL_TRITON_HW_CASTS=0 python3 -m vllm_xdsl.verify --provider triton &
wait

# 2. The kernel benchmark (alone on the GPU) at the issue's target sizes, every
# implementation, the Triton kernels as dispatched and with the f32 emulation. Kernel
# times (CUDA graphs), hidden size outermost: a cut-short run has every case at 4096.
step bench 220 python3 bench/kernels.py --impls triton,triton_emu,cuda --tokens 4096,16384 \
    --out "$OUT/kernels.md" --plot "$OUT/kernels.png"

# 3. Autotuned dispatch on the GPU: the bundled decoder's ops, every provider timed.
step tune 40 bash -c 'python3 -m vllm_xdsl.tune --model demo --hidden 4096 --dtype bfloat16 \
    --target cuda --max-tokens 4096 --budget 6 && python3 -m vllm_xdsl.tune --show'

# 4. The demo decoder at Llama-8B layer sizes: vllm_xdsl backend vs Inductor vs eager.
step latency 60 python3 bench/model_latency.py --device cuda --hidden 4096 --intermediate 14336 \
    --heads 32 --layers 2 --tokens 1,4096 --rounds 5 --no-rss

# 5. Where a 1-token step's time goes (host vs device, per operator), ours vs Inductor.
step profile 50 python3 bench/profile_decode.py --device cuda --layers 2 --steps 20
