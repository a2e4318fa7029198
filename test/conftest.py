"""Suite-wide checks (pytest loads this before any test module)."""

from __future__ import annotations

from collections.abc import Iterator

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
