"""The models of test/helpers/vllm_models_config.py inside real vLLM (CPU build), plain and through
both ways into our compiler, one fresh engine process each (test/helpers/vllm_engine.py): greedy
tokens equal to plain vLLM's, graphs that fell back, and the norm, residual-add and
act-and-mul sites raised against those of the model (vllm_models_config.expected_sites).

    .venv-vllm/bin/python bench/vllm_models_table.py                 # all 10 models
    .venv-vllm/bin/python bench/vllm_models_table.py --models llama,qwen3
    ... --out DIR --reuse plain   # keep each start's result in DIR, and take plain vLLM's
                                  # from an earlier run there (its tokens do not depend on us)
    ... --out DIR --render        # only the table of the results in DIR (no engine starts)

Each start takes 1-3 minutes on a 2-core machine (30 for the whole table). A model plain
vLLM cannot start is reported with vLLM's last line, and its other ways are not tried.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The engine runner and the model checkpoints are the in-vLLM tests' (test/helpers), which
# this benchmark runs as they do: test/ on the path once, as for bench/corpus_table.py.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))

from helpers.vllm_engine import WAYS, run_engine  # noqa: E402
from helpers.vllm_models_config import MODELS, expected_sites, write_checkpoint  # noqa: E402

COMPILED = [w for w in WAYS if w != "plain"]  # the ways through our compiler

KINDS = ("norm", "residual", "act")


def _sites(result: dict[str, Any], want: dict[str, int]) -> list[str]:
    """raised/expected per kind, for the graph that raised the fewest (each graph vLLM
    compiles is the whole model); nothing raised where every graph fell back."""
    graphs = result["graphs"]
    return [f"{min((g['sites'][k] for g in graphs), default=0)}/{want[k]}" for k in KINDS]


def format_table(results: dict[tuple[str, str], dict[str, Any]], models: list[str],
                 ways: list[str]) -> str:
    head = ("| model | way | tokens = plain vLLM's | graphs fallen back | norm | residual add "
            "| act-and-mul | start-up s |")
    lines = [head, "|---|---|---|---|---|---|---|---:|"]
    for model in models:
        plain = results.get((model, "plain"))
        if plain is None:
            lines.append(f"| {model} | - | not run | | | | | |")
            continue
        if "error" in plain:
            lines.append(f"| {model} | plain | vLLM's CPU build cannot run it: "
                         f"{plain['error']} | | | | | |")
            continue
        lines.append(f"| {model} | plain | - | - | | | | {plain['startup_s']:.0f} |")
        want = expected_sites(model)
        for way in ways:
            r = results.get((model, way))
            if r is None:
                continue
            if "error" in r:
                lines.append(f"| {model} | {way} | failed: {r['error']} | | | | | |")
                continue
            same = "yes" if r["tokens"] == plain["tokens"] else "**no**"
            graphs = len(r["graphs"]) + r["fallbacks"]
            norm, residual, act = _sites(r, want)
            lines.append(f"| {model} | {way} | {same} | {r['fallbacks']} of {graphs} | {norm} "
                         f"| {residual} | {act} | {r['startup_s']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma list of " + ",".join(MODELS))
    parser.add_argument("--ways", default="backend,post_grad",
                        help=f"comma list of {','.join(COMPILED)} (plain always runs)")
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "vllm-table"),
                        help="directory for each start's result, checkpoints and logs")
    parser.add_argument("--reuse", default="",
                        help="comma list of ways whose results in --out are taken as they are")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per engine start")
    parser.add_argument("--render", action="store_true",
                        help="print the table of the results in --out, starting no engine")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    ways = [w for w in args.ways.split(",") if w]
    reuse = {w for w in args.reuse.split(",") if w}
    bad = ([m for m in models if m not in MODELS]
           + [w for w in ways + sorted(reuse) if w not in WAYS] + [w for w in ways if w == "plain"])
    if bad or not models:
        print(f"error: unknown or misplaced names {bad or '(no model)'}; models: "
              f"{','.join(MODELS)}; ways: {','.join(COMPILED)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    if args.render:
        for model in models:
            for way in ["plain", *ways]:
                saved = out / "results" / f"{model}-{way}.json"
                if saved.exists():
                    results[model, way] = json.loads(saved.read_text())
        print(format_table(results, models, ways))
        return 0
    for model in models:
        checkpoint = write_checkpoint(model, out / "checkpoints" / model)
        for way in ["plain", *ways]:
            saved = out / "results" / f"{model}-{way}.json"
            if way in reuse and saved.exists():
                results[model, way] = json.loads(saved.read_text())
            elif way != "plain" and "error" in results[model, "plain"]:
                continue
            else:
                start = time.perf_counter()
                results[model, way] = run_engine(checkpoint, way, timeout=args.timeout,
                                                 log=out / "logs" / f"{model}-{way}.log")
                results[model, way]["wall_s"] = round(time.perf_counter() - start)
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text(json.dumps(results[model, way]))
            summary = {k: v for k, v in results[model, way].items() if k != "graphs"}
            print(f"# {model} {way}: {json.dumps(summary)[:400]}", flush=True)
    print(format_table(results, models, ways))
    return 0


if __name__ == "__main__":
    sys.exit(main())
