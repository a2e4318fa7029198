"""One vLLM engine start in a fresh process: `LLM.generate` on a tiny checkpoint, plain or
with our compiler through one of the two ways in (each also with vLLM IR's torch wrap on:
`backend_ir`, `post_grad_ir`), and what our compiler did there.

    result = run_engine(checkpoint, "backend")   # in the caller's process: a child runs it

The child starts the engine with empty compile caches (a graph served from vLLM's or
Inductor's cache never meets our compiler), greedy sampling on token-id prompts, and prints
one `RESULT {json}` line: the tokens, the start-up time, the fallback warnings of our
compiler (the backend's "running the unmodified graph", the post-grad pass's "graph left
unchanged") and, per graph our pipeline compiled, its semantic ops after raise-native and
after fuse-norm-quant with the sites they cover (test/corpus/sites.py's classification).
A start that fails (an architecture vLLM's CPU build cannot run) comes back as
`{"error": <its last line>}`. Used by test/in_vllm (conftest.py) and
bench/vllm_models_table.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WAYS = ("plain", "backend", "post_grad", "backend_ir", "post_grad_ir")
# The backend way's baseline, not through our compiler: vLLM hands Dynamo's graph, as in the
# backend way, to Inductor's compile_fx as a plain torch.compile backend.
INDUCTOR_BACKEND = "inductor_backend"
# Our backend with vLLM's custom ops off (their torch code in the graph, as in plain vLLM's
# Inductor config), its compiled graphs checked call by call against the traced graphs run
# eagerly (vllm_differential.py): the result's `checked_calls`.
CHECKED = "backend_checked"
ALL_WAYS = (*WAYS, INDUCTOR_BACKEND, CHECKED)
PROMPTS = [[1, 5, 9, 17, 33, 65], [2, 4, 8, 16, 32, 64, 128, 200]]
FALLBACK_MARKS = ("running the unmodified graph", "graph left unchanged")


def compilation_config(way: str) -> dict[str, Any] | None:
    """vLLM's compilation_config for one way in (None: vLLM's default)."""
    if way == "plain":
        return None
    if way == "backend":  # DYNAMO_TRACE_ONCE hands Dynamo's graph to a torch.compile backend
        return {"mode": 2, "backend": "vllm_xdsl"}
    if way == INDUCTOR_BACKEND:
        return {"mode": 2, "backend": "torch._inductor.compile_fx.compile_fx"}
    if way == CHECKED:
        from vllm_differential import QUALNAME

        return {"mode": 2, "backend": QUALNAME, "custom_ops": ["none"]}
    if way == "post_grad":  # vLLM's default CPU config: Inductor, with our post-grad pass
        return {"inductor_compile_config": _post_grad_pass()}
    # vLLM IR's torch wrap on: the graph holds `torch.ops.vllm_ir.*` nodes instead of their
    # natives. vLLM's default CPU config turns the wrap off whatever it is given, so the
    # post-grad way names mode 2 and Inductor itself (which it then takes with its options).
    if way == "backend_ir":
        return {"mode": 2, "backend": "vllm_xdsl", "ir_enable_torch_wrap": True}
    if way == "post_grad_ir":
        return {"mode": 2, "backend": "inductor", "ir_enable_torch_wrap": True,
                "inductor_compile_config": _post_grad_pass()}
    raise ValueError(f"unknown way {way!r}; known: {', '.join(ALL_WAYS)}")


def _post_grad_pass() -> dict[str, Any]:
    import vllm_xdsl

    return {"post_grad_custom_post_pass": vllm_xdsl.post_grad_pass()}


def run_engine(checkpoint: Path, way: str, tokens: int = 8, timeout: float = 900,
               log: Path | None = None, env: dict[str, str] | None = None,
               kernel_cache: Path | None = None, model_info: Path | None = None
               ) -> dict[str, Any]:
    """Start one engine in a child process (fresh caches, `env` added to its environment)
    and return its RESULT, or {"error": ...} naming the exit status and the last line it
    printed. `kernel_cache`: our cache directory (built kernels, keyed by their source), to
    share between starts that do not time a first build; by default a fresh one.
    `model_info`: a directory for vLLM's record of what a model class supports
    (VLLM_CACHE_ROOT/modelinfos, keyed by the model's source file), to share between starts:
    without it each start learns that again in a subprocess (12-16 s). It holds nothing
    compiled, so every graph still meets our compiler; by default a fresh one."""
    if way not in ALL_WAYS:
        raise ValueError(f"unknown way {way!r}; known: {', '.join(ALL_WAYS)}")
    with tempfile.TemporaryDirectory(prefix=f"vllm-engine-{way}-") as tmp:
        if model_info is not None:
            model_info.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / "vllm").mkdir()
            (Path(tmp) / "vllm" / "modelinfos").symlink_to(model_info.resolve(),
                                                           target_is_directory=True)
        # vLLM's AOT compile wants a serializable compiled graph: the checking wrapper is not.
        checked = {"VLLM_USE_AOT_COMPILE": "0"} if way == CHECKED else {}
        child_env = {**os.environ, **(env or {}), **checked, "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
               "VLLM_CACHE_ROOT": f"{tmp}/vllm", "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor",
               "VLLM_XDSL_CACHE_DIR": str(kernel_cache or f"{tmp}/xdsl")}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--checkpoint", str(checkpoint),
               "--way", way, "--tokens", str(tokens)]
        try:
            proc = subprocess.run(cmd, env=child_env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"no result within {timeout:.0f} s"}
    output = proc.stdout + proc.stderr
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(output)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        # The exception's line if there is one (progress bars may come after it).
        said = [ln for ln in output.splitlines() if ln.strip()] or ["no output"]
        raised = [ln for ln in said if re.search(r"\w(Error|Exception): ", ln)]
        return {"error": f"exit {proc.returncode}: {(raised or said)[-1].strip()[:300]}"}
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    return result


def _sites_module() -> Any:
    """test/corpus/sites.py alone (the corpus package itself builds its model cases)."""
    spec = importlib.util.spec_from_file_location(
        "corpus_sites", HERE.parent / "corpus" / "sites.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().splitlines()[0][:300])


def _child(checkpoint: str, way: str, tokens: int) -> None:
    seen = _Warnings()
    logging.getLogger("vllm_xdsl").addHandler(seen)
    from vllm import LLM, SamplingParams, TokensPrompt

    from vllm_xdsl.compile import RESULTS

    config = compilation_config(way)
    kwargs: dict[str, Any] = {} if config is None else {"compilation_config": config}
    start = time.perf_counter()
    llm = LLM(model=checkpoint, skip_tokenizer_init=True, gpu_memory_utilization=0.1,
              max_model_len=256, seed=0, **kwargs)
    startup = time.perf_counter() - start
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in PROMPTS],
                           SamplingParams(temperature=0.0, max_tokens=tokens,
                                          ignore_eos=True, detokenize=False),
                           use_tqdm=False)
    sites = _sites_module()
    graphs = []
    for result in RESULTS.since(0):
        counts = {s.name: {k: v for k, v in s.op_counts.items() if k.startswith("vllm.")}
                  for s in result.stages}
        raised, fused = counts.get("raise-native", {}), counts.get("fuse-norm-quant", {})
        covered = sites.raised_sites(raised, fused)
        last = result.stages[-1].op_counts if result.stages else {}
        lowered = {k: v for k, v in last.items()
                   if not k.startswith(("torch.", "func.", "builtin."))}
        graphs.append({"raised": raised, "fused": fused, "lowered": lowered,
                       "sites": dict(zip(("norm", "residual", "act", "quant", "pairs"),
                                         covered.astuple(), strict=True))})
    checked = sys.modules.get("vllm_differential")  # imported by vLLM in the CHECKED way
    print("RESULT " + json.dumps({
        "tokens": [list(o.outputs[0].token_ids) for o in outputs],
        "checked_calls": checked.CALLS if checked is not None else None,
        "startup_s": round(startup, 1),
        "warnings": seen.messages,
        "fallbacks": sum(any(m in w for m in FALLBACK_MARKS) for w in seen.messages),
        "graphs": graphs,
    }), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--way", choices=ALL_WAYS, required=True)
    parser.add_argument("--tokens", type=int, default=8)
    args = parser.parse_args()
    if not (Path(args.checkpoint) / "config.json").exists():
        sys.exit(f"error: no checkpoint at {args.checkpoint} (no config.json)")
    _child(args.checkpoint, args.way, args.tokens)


if __name__ == "__main__":
    main()
