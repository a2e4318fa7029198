"""The suite's guard sees every way a test can leave torch's configuration changed."""

from __future__ import annotations

import torch._inductor.config as inductor_config
from torch_config_guard import differences, snapshot


def test_a_restored_patch_leaves_nothing() -> None:
    before = snapshot()
    with inductor_config.patch(fx_graph_cache=not inductor_config.fx_graph_cache):
        assert differences(before, snapshot())
    assert differences(before, snapshot()) == []


def test_a_changed_value_is_named() -> None:
    before = snapshot()
    old = inductor_config.compile_threads
    inductor_config.compile_threads = old + 1
    try:
        assert differences(before, snapshot()) == [
            f"torch._inductor.config.compile_threads: {old!r} -> {old + 1!r}"]
    finally:
        inductor_config.compile_threads = old


def test_a_deleted_entry_is_named_even_if_its_value_is_the_default() -> None:
    # What undoing pytest 9.2's monkeypatch.setattr on a torch config module does.
    before = snapshot()
    old = inductor_config.fx_graph_cache
    delattr(inductor_config, "fx_graph_cache")
    try:
        assert differences(before, snapshot()) == [
            "torch._inductor.config.fx_graph_cache was deleted (hidden: it no longer exists)"]
    finally:
        inductor_config.fx_graph_cache = old  # setattr un-hides the entry
    assert differences(before, snapshot()) == []
