"""examples/vllm_tiny_llama.py, the program the README's vLLM snippet is taken from
(test/test_readme.py checks that it is), runs as the README says: plain vLLM, the post-grad
pass and the backend give the same greedy tokens, our compiler takes at least one graph
each way in and falls back on none. Three engine starts in one process, a few minutes."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vllm_tiny_llama.py"
LINE = re.compile(r"^(plain|post-grad pass|backend): tokens (\[.*\]); "
                  r"graphs compiled by vllm_xdsl: (\d+), fell back: (\d+)$", re.M)


def test_the_example_runs_as_the_readme_says(tmp_path: Path) -> None:
    env = {**os.environ, "VLLM_XDSL_CACHE_DIR": str(tmp_path / "xdsl"),
           # the package of this tree, whichever checkout the environment was built from
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # the example sets it itself
    result = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path / "llama")],
                            capture_output=True, text=True, cwd=tmp_path, env=env,
                            timeout=1800)
    out = result.stdout
    assert result.returncode == 0, (out + result.stderr)[-4000:]
    ways = {m[0]: (ast.literal_eval(m[1]), int(m[2]), int(m[3])) for m in LINE.findall(out)}
    assert list(ways) == ["plain", "post-grad pass", "backend"], out
    plain_tokens, plain_graphs, _ = ways["plain"]
    assert [len(t) for t in plain_tokens] == [8, 8]  # max_tokens with ignore_eos
    assert plain_graphs == 0  # plain vLLM never calls our compiler
    for way in ("post-grad pass", "backend"):
        tokens, graphs, fell_back = ways[way]
        assert tokens == plain_tokens, way
        assert graphs >= 1 and fell_back == 0, (way, graphs, fell_back)
    assert "tokens equal plain vLLM's: yes" in out
    assert (tmp_path / "llama" / "config.json").is_file()  # it wrote the checkpoint there
