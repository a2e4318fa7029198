"""What a test may not leave behind: a changed torch configuration.

A test that changes Dynamo's, Inductor's or AOTAutograd's configuration without restoring
it changes every later compile in the process, plain `backend="inductor"` included. The
classic way in: pytest's `monkeypatch.setattr` on a torch config module reads the old value
from the module's `__dict__`, where torch's config entries are not, so undoing the patch
calls `delattr`, and torch then hides the entry for the rest of the process. Patch torch's
configuration with its own `config.patch(...)`, which restores by setattr.
"""

from __future__ import annotations

import importlib
from typing import Any

CONFIG_MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")

Snapshot = dict[str, tuple[dict[str, Any], frozenset[str]]]


def snapshot() -> Snapshot:
    """Every config module's values, and the entries it hides (a deleted entry is hidden)."""
    out: Snapshot = {}
    for name in CONFIG_MODULES:
        module: Any = importlib.import_module(name)
        hidden = frozenset(key for key, entry in module._config.items() if entry.hide)
        out[name] = (module.get_config_copy(), hidden)
    return out


def differences(before: Snapshot, after: Snapshot) -> list[str]:
    """One line per entry that changed between two snapshots."""
    lines: list[str] = []
    for name, (values, hidden) in before.items():
        now, now_hidden = after[name]
        for key in sorted(now_hidden - hidden):
            lines.append(f"{name}.{key} was deleted (hidden: it no longer exists)")
        for key in sorted(set(values) | set(now)):
            if key not in now_hidden and values.get(key) != now.get(key):
                lines.append(f"{name}.{key}: {values.get(key)!r} -> {now.get(key)!r}")
    return lines
