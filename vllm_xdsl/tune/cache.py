"""The persistent tuning cache: one JSON file in the user cache directory.

    $VLLM_XDSL_CACHE_DIR/autotune.json   (else $XDG_CACHE_HOME/vllm_xdsl, else ~/.cache/vllm_xdsl)

The file records the environment it was measured in (device name, driver and toolkit,
package versions, threads); a file from another environment is stale. Each entry (one
bucket) records the source hash of every candidate it measured; an entry whose candidates
or hashes differ from the registry now is re-measured. A corrupt or stale file is ignored
with one warning and rewritten on the next save. Saving merges with what other processes
wrote meanwhile (under a lock) and replaces the file atomically (write, fsync, rename).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import inspect
import json
import os
import platform
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from vllm_xdsl import user_cache

FORMAT = 1
FILE_NAME = "autotune.json"
_warned: set[str] = set()


def cache_dir() -> Path:
    return user_cache.cache_dir()


def cache_path() -> Path:
    return cache_dir() / FILE_NAME


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


@functools.cache
def environment(target: str) -> dict[str, Any]:
    """What the timings depend on besides the code: device, driver/toolkit, versions."""
    env: dict[str, Any] = {
        "format": FORMAT,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "xdsl": _version("xdsl"),
        "vllm_xdsl": _version("vllm-xdsl"),
    }
    if target == "cpu":
        env.update(device=_cpu_name(), threads=torch.get_num_threads())
    else:
        props = torch.cuda.get_device_properties(0)
        env.update(device=props.name, cuda=torch.version.cuda, hip=torch.version.hip,
                   driver=_driver_version(), capability=list(torch.cuda.get_device_capability()))
    return env


_DRIVER_VERSION = "_cuda_getDriverVersion"  # private torch API, absent from torch's stubs


def _driver_version() -> str | None:
    with contextlib.suppress(Exception):
        return str(getattr(torch._C, _DRIVER_VERSION)())
    return None


@functools.cache
def _dir_hash(directory: str) -> str:
    h = hashlib.sha256()
    for path in sorted(Path(directory).rglob("*.py")):
        if "__pycache__" not in path.parts:
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@functools.cache
def impl_hash(fn: Callable[..., Any]) -> str:
    """Source hash of an implementation: its own source and every .py file of its package
    directory (kernel templates and launchers usually live next to the registered
    function)."""
    h = hashlib.sha256()
    fn = inspect.unwrap(fn)
    try:
        h.update(inspect.getsource(fn).encode())
        src = inspect.getsourcefile(fn)
    except (OSError, TypeError):
        src = None
        h.update(repr(fn).encode())
    if src is not None:
        h.update(_dir_hash(str(Path(src).parent)).encode())
    return h.hexdigest()[:16]


def warn_once(path: Path, why: str) -> None:
    """One warning per cache file and process (later loads stay silent)."""
    if str(path) in _warned:
        return
    _warned.add(str(path))
    warnings.warn(f"vllm_xdsl: autotune cache {path} {why}; ignored, it will be rewritten",
                  RuntimeWarning, stacklevel=4)


def _read(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the parsed file, or None; why it is unusable, or None)."""
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError):  # no file (save() warns about the dir)
        return None, None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"is corrupt ({type(e).__name__}: {e})"
    if not (isinstance(data, dict) and isinstance(data.get("environments"), dict)
            and all(isinstance(v, dict) and isinstance(v.get("entries"), dict)
                    and isinstance(v.get("env"), dict) for v in data["environments"].values())):
        return None, "is corrupt (not an autotune table)"
    if data.get("format") != FORMAT:
        return None, f"is stale (format {data.get('format')!r}, expected {FORMAT})"
    return data, None


def load(target: str) -> dict[str, Any]:
    """The cached entries of this environment ({} if none, corrupt or stale)."""
    path = cache_path()
    data, why = _read(path)
    if why is not None:
        warn_once(path, why)
        return {}
    if data is None or not has_device(target):
        return {}  # no device: this environment cannot be known (VLLM_XDSL_TUNE_TABLE can)
    env = environment(target)
    section = data["environments"].get(target)
    if section is None:
        return {}
    if section["env"] != env:
        changed = sorted(k for k in set(env) | set(section["env"])
                         if env.get(k) != section["env"].get(k))
        warn_once(path, f"is stale for target {target} (changed: {', '.join(changed)})")
        return {}
    return dict(section["entries"])


def has_device(target: str) -> bool:
    return target == "cpu" or torch.cuda.is_available()


def read_section(target: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(environment, entries) stored for `target`, as they are (for display)."""
    data, why = _read(cache_path())
    if why is not None:
        warn_once(cache_path(), why)
    section = (data or {"environments": {}})["environments"].get(target)
    return (None, {}) if section is None else (section["env"], dict(section["entries"]))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def save(target: str, entries: dict[str, Any]) -> Path:
    """Merge `entries` into the file (other processes' entries kept) and replace it
    atomically; a corrupt or stale file is replaced by this environment's table. A cache
    directory that cannot be written warns once (the caller keeps its entries in memory)."""
    path = cache_path()
    try:
        return _save(path, target, entries)
    except OSError as e:
        key = f"save {path.parent}"
        if key not in _warned:
            _warned.add(key)
            warnings.warn(f"vllm_xdsl: tuning results not saved: {user_cache.unusable(path.parent, e)}"
                          "; they hold for this process only", RuntimeWarning, stacklevel=3)
        return path


def _save(path: Path, target: str, entries: dict[str, Any]) -> Path:
    env = environment(target)
    with _locked(path):
        data, _ = _read(path)
        if data is None:
            data = {"format": FORMAT, "environments": {}}
        section = data["environments"].get(target)
        if section is None or section["env"] != env:
            section = {"env": env, "entries": {}}
        section["entries"].update(entries)
        data["environments"][target] = section
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".autotune-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return path
