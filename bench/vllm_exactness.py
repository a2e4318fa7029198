"""Does our compiler change what a vLLM model computes? Checked call by call inside vLLM.

Per model, each way a fresh engine in its own child process with empty caches, greedy
tokens of one prompt:

- `eager`: vLLM without compilation (mode 0) and with its custom ops off, so that every op
  runs as the PyTorch code Dynamo would trace: the reference.
- `ours@native`, `ours@cpu`: our backend way (mode 2, custom ops off, our pipeline, the
  rest of the graph run eagerly instead of by Inductor: option inner="eager"), lowered to
  the given priority, each call of the compiled graph checked against the graph Dynamo
  traced, run eagerly on the same inputs (test/helpers/vllm_differential.py): the calls
  whose outputs are not the same bits, and whether the reference of such a call differs
  from itself (then the call says nothing about our graph).
- `plain`, `plain_emulate`: vLLM's default (Inductor), without and with
  TORCHINDUCTOR_EMULATE_PRECISION_CASTS: what Inductor's own code changes.
- `post_grad@P`, `post_grad_emulate@P`: the same with our post-grad pass, lowered to P.

The checkpoints and model shapes are bench/vllm_side_by_side.py's.

    .venv-vllm/bin/python bench/vllm_exactness.py --models llama2048_fp8_per_channel
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
WAYS = ("eager", "ours@native", "ours@cpu", "plain", "plain_emulate", "post_grad@cpu",
        "post_grad_emulate@cpu")
TEST = BENCH.parent / "test"
PROMPT = [1, 5, 9, 17, 33, 65]


def _child(way: str, ckpt: str, quantization: str | None, tokens: int) -> None:
    from vllm import LLM, SamplingParams, TokensPrompt
    from vllm_differential import QUALNAME

    import vllm_xdsl

    post_grad = {"inductor_compile_config": {
        "post_grad_custom_post_pass": vllm_xdsl.post_grad_pass()}}
    config: dict[str, Any] | None = {
        "eager": {"mode": 0, "custom_ops": ["none"]},
        "ours": {"mode": 2, "backend": QUALNAME, "custom_ops": ["none"]},
        "plain": None, "plain_emulate": None,
        "post_grad": post_grad, "post_grad_emulate": post_grad,
    }[way.split("@")[0]]
    # 256 tokens a step at most: vLLM's profile run (a first call that no step of the
    # prompt needs) then takes 256 tokens, not 4096; the checked ways run it up to three
    # times.
    llm = LLM(model=ckpt, skip_tokenizer_init=True, gpu_memory_utilization=0.1,
              max_model_len=256, max_num_batched_tokens=256, seed=0, quantization=quantization,
              **({} if config is None else {"compilation_config": config}))
    out = llm.generate([TokensPrompt(prompt_token_ids=PROMPT)],
                       SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True,
                                      detokenize=False), use_tqdm=False)
    from vllm_xdsl.compile import RESULTS

    checked = sys.modules.get("vllm_differential")  # imported by vLLM for the `ours` ways

    ops: dict[str, int] = {}
    for result in RESULTS.since(0):
        for stage in result.stages[1:]:  # raised, fused, lowered: the ops each stage left
            for name, n in stage.op_counts.items():
                if not name.startswith(("torch.", "func.", "builtin.")):
                    ops[f"{stage.name}: {name}"] = ops.get(f"{stage.name}: {name}", 0) + n
    print("RESULT " + json.dumps({"tokens": list(out[0].outputs[0].token_ids),
                                  "calls": checked.CALLS if checked else [], "ops": ops}),
          flush=True)


def _run(way: str, ckpt: Path, quantization: str | None, args: argparse.Namespace
         ) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vllm-exactness-") as tmp:
        env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
               # vLLM's AOT compile wants a serializable compiled graph: the wrapper's is not
               "VLLM_USE_AOT_COMPILE": "0",
               "VLLM_CACHE_ROOT": f"{tmp}/vllm", "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor",
               "VLLM_XDSL_CACHE_DIR": f"{tmp}/xdsl",
               "PYTHONPATH": os.pathsep.join([str(TEST / "helpers"), str(BENCH.parent),
                                              os.environ.get("PYTHONPATH", "")])}
        env.pop("VLLM_XDSL_PRIORITY", None)
        env.pop("TORCHINDUCTOR_EMULATE_PRECISION_CASTS", None)
        if "@" in way:
            env["VLLM_XDSL_PRIORITY"] = way.split("@")[1]
        if way.split("@")[0].endswith("_emulate"):
            env["TORCHINDUCTOR_EMULATE_PRECISION_CASTS"] = "1"
        cmd = [sys.executable, __file__, "--child", way, "--ckpt", str(ckpt),
               "--tokens", str(args.tokens), *(["--quantization", quantization]
                                               if quantization else [])]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                  timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"no result within {args.timeout} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        return {"error": tail[0][:300]}
    return json.loads(lines[-1].removeprefix("RESULT "))


def main() -> None:
    from vllm_side_by_side import BENCH_MODELS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(BENCH_MODELS),
                        help="comma list of " + ",".join(BENCH_MODELS))
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--ckpt-dir", default=str(Path(tempfile.gettempdir()) / "vllm-bench-ckpt"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--ckpt", help=argparse.SUPPRESS)
    parser.add_argument("--quantization", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child, args.ckpt, args.quantization, args.tokens)
    models = [m for m in args.models.split(",") if m]
    ways = [w for w in args.ways.split(",") if w]
    for name in models:
        if name not in BENCH_MODELS:
            sys.exit(f"error: unknown model {name!r}; known: {', '.join(BENCH_MODELS)}")
    for way in ways:
        if way.split("@")[0] not in {w.split("@")[0] for w in WAYS}:
            sys.exit(f"error: unknown way {way!r}; known: {', '.join(WAYS)} (ours@<priority>)")
    sys.path.insert(0, str(TEST))
    from helpers.vllm_models_config import write_checkpoint

    for name in models:
        checkpoint, quantization, shapes = BENCH_MODELS[name]
        ckpt = write_checkpoint(checkpoint, Path(args.ckpt_dir) / name, shapes=shapes)
        print(f"## {name}", flush=True)
        reference: list[int] | None = None
        for way in ways:
            r = _run(way, ckpt, quantization, args)
            if "error" in r:
                print(f"{way:14} error: {r['error']}", flush=True)
                continue
            reference = r["tokens"] if way == "eager" else reference
            same = ""
            if reference is not None:
                pairs = enumerate(zip(r["tokens"], reference, strict=True), start=1)
                first = next((i for i, (a, b) in pairs if a != b), None)
                same = "= eager" if first is None else f"differs from token {first}"
            print(f"{way:14} tokens {' '.join(map(str, r['tokens']))}  {same}", flush=True)
            if r["calls"]:
                differ = [c for c in r["calls"] if c["differ"]]
                print(f"{'':14} {len(r['calls'])} calls compared, {len(differ)} differ: "
                      + "; ".join(f"call {c['call']}: {c['differ']} of {c['values']} values "
                                  f"(the reference against itself: "
                                  f"{c['reference_differs_from_itself']}"
                                  f"{', no attention' if c['no_attention'] else ''})"
                                  for c in differ),
                      flush=True)
            if r["ops"]:
                print(f"{'':14} " + ", ".join(f"{k} {n}" for k, n in r["ops"].items()), flush=True)


if __name__ == "__main__":
    main()
