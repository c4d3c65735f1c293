# SPDX-License-Identifier: MIT
"""The cache of modules built by :func:`tensorffi.compile` (and of libraries carried by
portable handles): where it is, what is in it, how big it may grow.

>>> import tensorffi
>>> facts = tensorffi.cache.info()
>>> sorted(facts)
['bytes', 'limit', 'modules', 'path']

Location: the ``cache=`` argument, else ``$TENSORFFI_CACHE_DIR``, else
``$XDG_CACHE_HOME/tensorffi`` (``~/.cache/tensorffi``). The folder is created with
mode 0700 and refused when another user owns it or others may write to it: it holds
code this process will load.

Layout (one flat folder, so listing and pruning stay simple)::

    _tf_<name>_<key>.so     a built module; <key> hashes everything that defines it
    _tf_<name>_<key>.json   its manifest: name, recipe, the user's files the compiler
                            read (path + sha256), the system headers it read (path,
                            size, mtime), the cdef, size; its mtime is the last use
    recipes/<name>-<recipe>.json   the module keys built from one recipe, newest first
                            (a recipe is the call's own content; the files it
                            includes pick the module among them)
    libs/<sha256>.so        shared libraries carried by portable load() handles
    locks/                  one lock file per recipe (fcntl), so concurrent builds wait
    tmp.*                   build folders (removed when a build ends)
    CACHEDIR.TAG            the mark of a tensorffi cache (the standard tag backup
                            tools skip, with a line naming tensorffi)

A folder becomes a cache when tensorffi first uses it, if it is new, empty, or holds
only what tensorffi writes (a cache of an earlier version): it is then tagged. A
folder that holds anything else and no tag of tensorffi's is refused with a
:class:`~tensorffi.CacheError` (a mistaken ``--dir`` or ``TENSORFFI_CACHE_DIR``), and
:func:`clear` and pruning remove only entries named as tensorffi names them, so a
file a user puts in a cache survives them.

Size: ``$TENSORFFI_CACHE_SIZE`` (bytes, or with a K/M/G suffix; default 1G). After
each build the least recently used modules are removed until the cache fits.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import CacheError

DEFAULT_LIMIT = 1 << 30
MODULE_PREFIX = "_tf_"
TAG = "CACHEDIR.TAG"
#: the standard cache-directory tag (bford.info/cachedir), then ours
TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This folder is a tensorffi build cache (tensorffi.cache). tensorffi clears and prunes\n"
            "# only folders that hold this file, and in them only the entries it wrote.\n")
_OWN_DIRS = ("recipes", "libs", "locks")

_checked: dict[str, Path] = {}


def directory(override: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: ``override``, ``$TENSORFFI_CACHE_DIR``, or
    ``$XDG_CACHE_HOME/tensorffi`` (``~/.cache/tensorffi``). Created with mode 0700;
    refused (:class:`~tensorffi.CacheError`, a ``BuildError``) if another user owns it or others can
    write to it."""
    if override is not None:
        path = Path(override)
    elif os.environ.get("TENSORFFI_CACHE_DIR"):
        path = Path(os.environ["TENSORFFI_CACHE_DIR"])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base) / "tensorffi"
    path = Path(os.path.abspath(path))
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as exc:
        raise unusable(path, exc) from None
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"cache directory {path} is not a folder", str(path), "not a folder")
    if st.st_uid != os.getuid():
        raise CacheError(f"cache directory {path} belongs to another user (uid {st.st_uid}); refusing to load code from it",
                         str(path), "owned by another user", refused=True)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(
            f"cache directory {path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}); "
            f"refusing to load code from it (chmod 700 it, or set TENSORFFI_CACHE_DIR)",
            str(path), "writable by other users", refused=True,
        )
    _claim(path)
    return path


#: how tensorffi names what it writes: in the top folder, and in each of its own folders
_OWN_TOP = re.compile(rf"{MODULE_PREFIX}\w+\.(?:so|json)|(?:tmp|\.tmp)\.[A-Za-z0-9_]{{8}}")
_OWN_IN = {"recipes": re.compile(r"[\w.-]+-[0-9a-f]{24}\.json"), "libs": re.compile(r"[0-9a-f]{64}\.so"),
           "locks": re.compile(rf"(?:[\w.-]+-[0-9a-f]{{24}}|{MODULE_PREFIX}\w+)\.lock")}


def _foreign(path: Path) -> list[str]:
    """What in ``path`` tensorffi did not write (judged by the names it gives its files)."""
    out = []
    for e in os.scandir(path):
        if e.name in _OWN_IN and e.is_dir(follow_symlinks=False):
            out += [f"{e.name}/{f.name}" for f in os.scandir(e.path)
                    if not (_OWN_IN[e.name].fullmatch(f.name) and f.is_file(follow_symlinks=False))]
        elif not _OWN_TOP.fullmatch(e.name):
            out.append(e.name + ("/" if e.is_dir() else ""))
    return sorted(out)


def _claim(path: Path) -> None:
    """Make sure ``path`` is a tensorffi cache: tagged, or tagged now if it is empty or
    holds only what tensorffi writes; anything else is refused (nothing is written)."""
    tag = path / TAG
    try:
        with open(tag, "rb") as f:
            if b"tensorffi" in f.read(4096):
                return
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise unusable(path, exc) from None
    try:
        foreign = _foreign(path)
    except OSError as exc:
        raise unusable(path, exc) from None
    if foreign or tag.exists():
        shown = ", ".join(repr(n) for n in foreign[:4]) + (f" and {len(foreign) - 4} more" if len(foreign) > 4 else "")
        raise CacheError(
            f"cache directory {path} is not a tensorffi cache: it holds what tensorffi did not write "
            f"({shown or 'a ' + TAG + ' of another program'}) and no {TAG} of tensorffi's; tensorffi neither writes "
            f"into it nor clears it. Choose a new or empty folder (cache=, --dir, TENSORFFI_CACHE_DIR)",
            str(path), "not a tensorffi cache", refused=True)
    try:
        write_atomic(tag, TAG_TEXT.encode())
    except OSError as exc:
        raise unusable(path, exc) from None


def unusable(path: Path, exc: OSError) -> CacheError:
    """The error for a cache folder the system will not let us use (read-only, full,
    under a file, no permission)."""
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileExistsError):
        reason = f"{exc.filename or path} is a file, not a folder"
    elif isinstance(exc, NotADirectoryError):
        reason = f"a part of {exc.filename or path} is a file, not a folder"
    return CacheError(f"cache directory {path} is unusable: {reason}", str(path), reason)


def limit() -> int:
    """The size limit in bytes (``$TENSORFFI_CACHE_SIZE``, default 1 GiB)."""
    text = os.environ.get("TENSORFFI_CACHE_SIZE", "").strip()
    if not text:
        return DEFAULT_LIMIT
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    mult = 1
    if text[-1:].upper() in scale:
        mult = scale[text[-1].upper()]
        text = text[:-1]
    elif text[-2:].upper() in ("KB", "MB", "GB", "TB"):
        mult = scale[text[-2].upper()]
        text = text[:-2]
    try:
        value = float(text) * mult
    except ValueError:
        value = float("nan")
    if not (0 <= value < float("inf")):  # nan, inf and negative sizes too
        raise CacheError(f"TENSORFFI_CACHE_SIZE must be a size like 500M or 2G, got {os.environ['TENSORFFI_CACHE_SIZE']!r}",
                         reason="bad TENSORFFI_CACHE_SIZE", refused=True)
    return int(value)


def subdir(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@contextlib.contextmanager
def locked(root: Path, name: str, *, required: bool = True) -> Iterator[None]:
    """An exclusive lock on ``name`` in this cache (threads and processes).
    ``required=False``: where no lock file can be made (a read-only cache, where
    nothing is built or removed), go on without one."""
    try:
        f = open(subdir(root, "locks") / (name + ".lock"), "a")
    except OSError:
        if required:
            raise
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def touch(path: Path) -> None:
    """Mark a manifest as used now (its mtime orders least-recently-used pruning)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def _modules(root: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return out
    for entry in entries:
        if not (entry.name.startswith(MODULE_PREFIX) and entry.name.endswith(".json")):
            continue
        stem = entry.name[: -len(".json")]
        manifest = read_json(Path(entry.path)) or {}
        so = root / (stem + ".so")
        try:
            size = so.stat().st_size
            last = entry.stat().st_mtime
        except OSError:
            size, last = 0, 0.0
        out.append(
            dict(
                module=stem,
                name=manifest.get("name", "?"),
                bytes=size,
                last_used=last,
                created=manifest.get("created", 0.0),
                files=[d[0] for d in manifest.get("deps", [])],
                path=str(so),
            )
        )
    return out


def info(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """What the cache holds: ``path``, ``bytes`` (modules and carried libraries),
    ``limit``, and ``modules`` (name, module, bytes, created, last_used, files read by
    the compiler), most recently used first."""
    root = directory(path)
    modules = sorted(_modules(root), key=lambda m: -m["last_used"])
    total = sum(m["bytes"] for m in modules) + _libs_bytes(root)
    return dict(path=str(root), bytes=total, limit=limit(), modules=modules)


def _libs_bytes(root: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(root / "libs"):
            with contextlib.suppress(OSError):
                total += entry.stat().st_size
    return total


def remove_module(root: Path, stem: str) -> None:
    """Remove one module (its manifest first, so a reader never trusts a half-removed
    module), under the module's lock: never between another process's check of the
    module and its load (tensorffi.byo loads under the same lock). A process that
    already loaded it keeps its mapping."""
    with locked(root, stem, required=False):
        for suffix in (".json", ".so"):
            with contextlib.suppress(OSError):
                os.unlink(root / (stem + suffix))


def clear(path: str | os.PathLike[str] | None = None) -> int:
    """Remove every module, recipe index and carried library; return how many
    modules were removed. Processes that loaded a module keep using it."""
    root = directory(path)
    modules = _modules(root)
    for m in modules:
        remove_module(root, m["module"])
    for name, own in _OWN_IN.items():
        if name == "locks":
            # a lock file another process holds must stay the one every process opens
            # (unlinked, the next process would lock a new file beside it): they stay
            continue
        # only what tensorffi wrote: a file of the user's in a cache folder survives
        with contextlib.suppress(OSError):
            for entry in os.scandir(root / name):
                if own.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
    for entry in os.scandir(root):
        if _OWN_TOP.fullmatch(entry.name) and entry.name.startswith("tmp.") and entry.is_dir(follow_symlinks=False):
            # a build folder older than an hour is left over from a killed process
            with contextlib.suppress(OSError):
                if time.time() - entry.stat().st_mtime > 3600:
                    shutil.rmtree(entry.path, ignore_errors=True)
    return len(modules)


def prune(root: Path, keep: str = "", max_bytes: int | None = None) -> list[str]:
    """Remove least recently used modules and carried libraries (never ``keep``) until
    the cache fits ``max_bytes`` (default :func:`limit`); return what was removed."""
    cap = limit() if max_bytes is None else max_bytes
    entries = [(m["last_used"], m["bytes"], m["module"], True) for m in _modules(root)]
    with contextlib.suppress(OSError):
        for entry in os.scandir(root / "libs"):
            if not (_OWN_IN["libs"].fullmatch(entry.name) and entry.is_file(follow_symlinks=False)):
                continue  # not a library tensorffi carried: not its to remove
            with contextlib.suppress(OSError):
                st = entry.stat()
                entries.append((st.st_mtime, st.st_size, entry.path, False))
    total = sum(e[1] for e in entries)
    removed: list[str] = []
    for _, size, name, is_module in sorted(entries):
        if total <= cap:
            break
        if name == keep:
            continue
        if is_module:
            remove_module(root, name)
        else:
            with contextlib.suppress(OSError):
                os.unlink(name)
        total -= size
        removed.append(name)
    return removed


def cache_command(action: str, path: str | None, as_json: bool = False, say: Callable[[str], None] = print) -> int:
    """``tensorffi cache list`` (modules, most recently used first), ``clear``, ``path``."""
    import time

    from . import cache

    if action == "path":
        say(str(cache.directory(path)))
        return 0
    if action == "clear":
        n = cache.clear(path)
        say(f"removed {n} module(s) from {cache.directory(path)}")
        return 0
    facts = cache.info(path)
    if as_json:
        say(json.dumps(facts, indent=2))
        return 0
    say(f"{facts['path']}: {len(facts['modules'])} module(s), {_size(facts['bytes'])} of {_size(facts['limit'])}")
    now = time.time()
    for m in facts["modules"]:
        files = ", ".join(m["files"][:3]) + (f" (+{len(m['files']) - 3})" if len(m["files"]) > 3 else "")
        say(f"  {m['name']:<20} {_size(m['bytes']):>9}  used {_ago(now - m['last_used']):>8} ago  {m['module']}  {files}")
    return 0


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def _ago(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"


__all__ = ["directory", "limit", "info", "clear", "prune", "cache_command", "DEFAULT_LIMIT", "MODULE_PREFIX"]


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: tab completion does not offer imports (np, torch, ...)
