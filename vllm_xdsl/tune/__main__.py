"""`python -m vllm_xdsl.tune`: tune the semantic ops of an IR file, or show the cached table.

    python -m vllm_xdsl.tune model.mlir [--target cpu] [--priority auto] [--max-tokens N]
                                        [--budget S]
    python -m vllm_xdsl.tune --model demo [--hidden 4096] [--layers 1] [--dtype bfloat16]
    python -m vllm_xdsl.tune --show [--target cpu] [--op rms_norm] [--json]

Tuning measures every `vllm.*` op of the file per token bucket (up to --max-tokens, or
the static token count) and prints one row per op and bucket: each candidate's time, the
winner, and the candidates excluded for wrong results; then how many timings ran, how long
it took and where the cache is. `--show --json` prints the table in the form
VLLM_XDSL_TUNE_TABLE accepts (tune on the target machine, lower anywhere).
Exit status 2 with one line on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from vllm_xdsl import user_cache
from vllm_xdsl.tune import cache, tuner


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        print(f"vllm_xdsl.tune: error: {message}", file=sys.stderr)
        sys.exit(2)


def _row(r: tuner.BucketResult, note: str = "") -> str:
    times = " | ".join(f"{p} {us:.1f}" for p, us in sorted(r.times.items(), key=lambda kv: kv[1]))
    extra = "".join(f"  [{p} excluded: wrong result]" for p in r.excluded)
    extra += "".join(f"  [{p} not measured: {why}]" for p, why in r.pruned.items())
    b = r.bucket
    return (f"{b.op:<26} T<={b.tokens:<6} {r.winner:<12} {times or '-'} (us){extra}{note}"
            f"\n{'':<26} {b.shape}")


def show(p: _Parser, target: str, op: str | None, as_json: bool) -> int:
    path = cache.cache_path()
    env, entries = cache.read_section(target)
    rows = [tuner.BucketResult.from_json(e) for e in entries.values()
            if op is None or e.get("op") == op]
    rows.sort(key=lambda r: (r.bucket.op, r.bucket.shape, r.bucket.tokens))
    if as_json:
        print(json.dumps({"entries": {r.bucket.key: r.to_json() for r in rows}}, indent=1))
        return 0
    print(f"autotune cache {path} (target {target}): {len(rows)} bucket(s)")
    if env is not None:
        print("measured on: " + ", ".join(f"{k} {v}" for k, v in sorted(env.items())))
        if cache.has_device(target) and env != cache.environment(target):
            print("(stale: this machine's environment differs; tuning again replaces it)")
    print(f"{'op':<26} {'bucket':<9} {'winner':<12} candidates (fastest first)")
    for r in rows:
        print(_row(r))
    return 0


def _parse_file(p: _Parser, path: str) -> Any:
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError

    from vllm_xdsl.dialects import make_context

    try:
        text = open(path).read()
    except OSError as e:
        p.error(f"cannot read {path}: {e.strerror}")
    try:
        module = Parser(make_context(), text, path).parse_module()
        module.verify()
    except (ParseError, Exception) as e:  # noqa: B014  (one line whatever the parser raises)
        lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
        p.error(f"{path}: not valid IR: {lines[0]}: {lines[-1].strip()}")
    return module


def _model_module(hidden: int, layers: int, dtype: str) -> Any:
    """The bundled decoder (vllm_xdsl/models) as the compiler sees it: captured with
    dynamic tokens, imported, raised and fused (the passes before lower-dispatch)."""
    import torch
    from xdsl.context import Context

    from vllm_xdsl.frontend.capture import capture
    from vllm_xdsl.frontend.module import import_graph
    from vllm_xdsl.models import DecoderConfig, TinyDecoder
    from vllm_xdsl.transforms import get_pass

    cfg = DecoderConfig(hidden=hidden, intermediate=2 * hidden, heads=4, layers=layers)
    torch.manual_seed(0)
    model = TinyDecoder(cfg).to(getattr(torch, dtype)).eval()
    gm = capture(model, torch.randint(0, cfg.vocab, (7,)))
    module = import_graph(gm).module
    for name in ("raise-native", "fuse-norm-quant"):
        get_pass(name)().apply(Context(), module)
    return module


def tune_file(p: _Parser, module: Any, path: str, target: str, priority: str) -> int:
    from vllm_xdsl.ops import ALL_OPS, DispatchError, parse_priority
    from vllm_xdsl.ops.policy import resolve
    from vllm_xdsl.transforms.lowering.lower_dispatch import TARGET_DEVICE, semantic_name
    from vllm_xdsl.transforms.lowering.meta_args import meta_args
    from vllm_xdsl.tune.auto import tune_call
    from vllm_xdsl.tune.bucket import token_count

    try:
        prio = parse_priority(priority)
    except DispatchError as e:
        p.error(str(e))
    try:  # before measuring: results that cannot be saved would be lost
        user_cache.ensure_cache_dir()
    except user_cache.CacheDirError as e:
        print(f"vllm_xdsl.tune: error: {e}", file=sys.stderr)
        return 1
    sem = [(op, name) for op in module.walk() if (name := semantic_name(op)) is not None]
    if not sem:
        p.error(f"{path}: no vllm.* op to tune")
    start = time.perf_counter()
    measured0 = tuner.STATS.measured
    seen: set[str] = set()
    for op, name in sem:
        meta = meta_args(op, TARGET_DEVICE[target])
        choices, source = resolve(name, prio, target)
        try:
            choice = tune_call(ALL_OPS[name], meta, choices, source, target,
                               tokens=token_count(meta))
        except DispatchError as e:
            print(f"vllm_xdsl.tune: error: {e}", file=sys.stderr)
            return 1
        for r in choice.results:
            if r.bucket.key in seen:
                continue
            seen.add(r.bucket.key)
            note = {"cache": "  (cached)", "table": "  (given table)",
                    "budget": "  (budget exhausted: previous winner)",
                    "single": "  (only native is eligible)"}.get(r.source, "")
            print(_row(r, note))
    took = time.perf_counter() - start
    print(f"{len(seen)} bucket(s), {tuner.STATS.measured - measured0} timing(s) in {took:.2f} s "
          f"(budget {tuner.budget_s():g} s per op); cache {cache.cache_path()}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = _Parser(prog="python -m vllm_xdsl.tune", description=__doc__.splitlines()[0])
    p.add_argument("file", nargs="?", help="IR file whose vllm.* ops to tune")
    p.add_argument("--model", choices=("demo",),
                   help="tune the bundled decoder (vllm_xdsl.demo's model) instead of a file")
    p.add_argument("--hidden", type=int, default=4096, help="with --model: hidden size")
    p.add_argument("--layers", type=int, default=1, help="with --model: decoder layers")
    p.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16",
                   help="with --model: activation dtype")
    p.add_argument("--show", action="store_true", help="print the cached table")
    p.add_argument("--target", choices=("cpu", "cuda", "rocm"), default=None,
                   help="dispatch target (default: cuda if a GPU is visible, else cpu)")
    p.add_argument("--op", help="with --show: only this op")
    p.add_argument("--json", action="store_true", help="with --show: JSON (a tuning table)")
    p.add_argument("--priority", default="auto",
                   help="priority list holding auto (default: auto = every provider)")
    p.add_argument("--max-tokens", type=int, help="largest token bucket (default 4096)")
    p.add_argument("--budget", type=float, help="seconds of tuning per op (default 60)")
    a = p.parse_args(argv)
    if a.max_tokens is not None and a.max_tokens < 1:
        p.error("--max-tokens must be at least 1")
    if a.budget is not None and a.budget <= 0:
        p.error("--budget must be positive")
    target = a.target or _default_target()
    if a.show + (a.file is not None) + (a.model is not None) != 1:
        p.error("give an IR file or --model to tune, or --show")
    if a.show:
        return show(p, target, a.op, a.json)
    if a.model is not None:
        if a.hidden < 8 or a.hidden % 4 or a.layers < 1:
            p.error("--hidden must be a multiple of 4 (>= 8) and --layers at least 1")
        module, where = _model_module(a.hidden, a.layers, a.dtype), f"model {a.model}"
    else:
        module, where = _parse_file(p, a.file), a.file
    # The options reach the tuner as its environment variables, for this call only.
    saved = {k: os.environ.get(k) for k in (tuner.MAX_TOKENS_ENV, tuner.BUDGET_ENV)}
    for key, value in ((tuner.MAX_TOKENS_ENV, a.max_tokens), (tuner.BUDGET_ENV, a.budget)):
        if value is not None:
            os.environ[key] = str(value)
    try:
        return tune_file(p, module, where, target, a.priority)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _default_target() -> str:
    import torch

    if torch.cuda.is_available():
        return "rocm" if torch.version.hip else "cuda"
    return "cpu"


if __name__ == "__main__":
    sys.exit(main())
