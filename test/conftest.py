"""Suite-wide checks and shared fixtures (pytest loads this before any test module)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from torch_config_guard import differences, snapshot


@pytest.fixture(autouse=True)
def torch_config_unchanged() -> Iterator[None]:
    """Fail the test that leaves torch's configuration changed (torch_config_guard.py)."""
    before = snapshot()
    yield
    changed = differences(before, snapshot())
    if changed:
        pytest.fail("the test left torch's configuration changed (patch it with torch's "
                    "config.patch(...), never monkeypatch.setattr):\n  " + "\n  ".join(changed))


@pytest.fixture
def scratch() -> Iterator[Callable[..., Any]]:
    """register(op, provider, fn, **kw): an implementation registered for this test only;
    afterwards it is unregistered and the priority policy is back to its default."""
    from vllm_xdsl import ops

    added: list[tuple[ops.SemanticOp, str]] = []

    def register(op: ops.SemanticOp, provider: str, fn: Callable[..., Any], **kw: Any) -> Any:
        op.register_impl(provider, **kw)(fn)
        added.append((op, provider))
        return fn

    yield register
    for op, provider in added:
        op.unregister_impl(provider)
    ops.set_priority(None)
