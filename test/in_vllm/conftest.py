"""The tests that need vLLM. They run in the vLLM environment (scripts/vllm-env builds it;
scripts/test runs them there, the main pytest run ignores this directory). Without vLLM
each module skips itself, except where VLLM_XDSL_REQUIRE_VLLM is set (CI): there a vLLM
that does not import is an error, never a silent skip.

`vllm_engine(model, way[, priority])` starts one engine per (model, way, priority) and
session, each in a fresh process with empty compile caches (test/helpers/vllm_engine.py):
an engine start costs 40-70 s, so tests share them. The starts share what holds nothing
compiled: our built kernels, and vLLM's record of what a model class supports, which it
otherwise learns again in a subprocess at every start (measured 16 s on the first start,
0 s on the next ones, 2026-12-07).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

if os.environ.get("VLLM_XDSL_REQUIRE_VLLM"):
    try:
        import vllm  # noqa: F401
    except Exception as e:  # an ImportError, or a broken install (torchvision's ABI)
        raise pytest.UsageError(
            f"VLLM_XDSL_REQUIRE_VLLM is set but vllm does not import ({type(e).__name__}: "
            f"{e}); build the environment with scripts/vllm-env") from e

EngineRun = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> EngineRun:
    """run(model, way) -> helpers.vllm_engine.run_engine's result for a checkpoint of
    helpers.vllm_models_config.MODELS[model]; each (model, way) starts once per session."""
    from helpers.vllm_engine import run_engine
    from helpers.vllm_models_config import engine_env, write_checkpoint

    root = tmp_path_factory.mktemp("vllm")
    done: dict[tuple[str, str], dict[str, Any]] = {}

    def run(model: str, way: str, priority: str | None = None) -> dict[str, Any]:
        """`priority`: VLLM_XDSL_PRIORITY for our lowering in that engine."""
        key = (model, way if priority is None else f"{way}@{priority}")
        if key not in done:
            checkpoint = write_checkpoint(model, root / "checkpoints" / model)
            env = {**engine_env(model),
                   **({} if priority is None else {"VLLM_XDSL_PRIORITY": priority})}
            # One kernel cache for the session (its entries are keyed by their source): a
            # fresh one per start would build the cpu kernel library in each that uses it.
            # vLLM's model-class records are shared too: nothing compiled is in them.
            done[key] = run_engine(checkpoint, way, env=env, kernel_cache=root / "xdsl",
                                   model_info=root / "modelinfos",
                                   log=root / "logs" / f"{model}-{key[1]}.log")
        return done[key]

    return run
