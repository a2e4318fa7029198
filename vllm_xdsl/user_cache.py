"""The user cache directory: built CUDA/HIP kernel libraries and the tuning cache.

`VLLM_XDSL_CACHE_DIR`, else `$XDG_CACHE_HOME/vllm_xdsl`, else `~/.cache/vllm_xdsl`. A
directory that cannot be created or written (the variable names a file, a read-only place)
is reported in one line that names the variable and the path.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "VLLM_XDSL_CACHE_DIR"


class CacheDirError(RuntimeError):
    """The cache directory cannot be used; the message is one line naming it."""


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "vllm_xdsl"


def unusable(path: Path, error: OSError | str) -> str:
    """One line: which directory (as the user set it) and why it cannot be used."""
    if isinstance(error, FileExistsError):  # what mkdir(exist_ok=True) says of a file
        why = "it exists and is not a directory"
    else:
        why = error if isinstance(error, str) else (error.strerror or str(error))
    if os.environ.get(CACHE_ENV):
        where = f"{CACHE_ENV}={os.environ[CACHE_ENV]}"
    else:
        where = f"the cache directory {path} (set {CACHE_ENV} to use another)"
    return f"{where} is not a writable directory ({why})"


def ensure_cache_dir() -> Path:
    """The cache directory, created if needed; CacheDirError if it cannot be written."""
    path = cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CacheDirError(unusable(path, e)) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CacheDirError(unusable(path, "permission denied"))
    return path
