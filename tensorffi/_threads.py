# SPDX-License-Identifier: MIT
"""How many threads tensorffi's kernels use: the thread policy (``threads=`` arguments)."""
from __future__ import annotations

import os
import sys
from typing import Any

from ._lib import lib
from .errors import ArgumentValueError

__all__ = ["get_num_threads", "set_num_threads", "resolve_threads"]

# ---- threads ---------------------------------------------------------------
#
# The default thread count follows the host: the smallest of torch's intra-op thread
# count, $OMP_NUM_THREADS, the CPUs this process may run on (its affinity) and its
# cgroup CPU quota. So a DataLoader worker (torch sets 1 thread in each), a dask
# worker (OMP_NUM_THREADS=1) or a container limited to 2 CPUs does not oversubscribe.
# $TENSORFFI_NUM_THREADS and set_num_threads() override it. The host limits are read
# once (and again in a forked child); torch's count is read on every call (~0.1 us),
# so that torch.set_num_threads() is followed at once.

_thread_state: list[Any] = [None, None, False]  # [set by the user, host limit, host limit is an override]
_torch_threads: list[Any] = [None]  # torch.get_num_threads, once torch is imported


def _positive_int(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def _cgroup_cpu_limit(root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> int | None:
    """CPUs the cgroup CPU quota allows (rounded up), or None if there is no quota.

    cgroup v2: ``cpu.max`` ("<quota> <period>" or "max <period>") of the process's
    cgroup and each ancestor; v1: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of the
    cpu controller's hierarchy. In a container the cgroup path of /proc/self/cgroup
    may not exist under the container's /sys/fs/cgroup; its root is read then.
    """
    try:
        with open(proc_cgroup) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    best: int | None = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # cgroup v2
            base, version = root, "v2"
        elif "cpu" in controllers.split(","):  # the v1 cpu controller's hierarchy
            names = (controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu")
            base = next((os.path.join(root, n) for n in names if os.path.isdir(os.path.join(root, n))), "")
            version = "v1"
            if not base:
                continue
        else:
            continue
        # the cgroup and its ancestors, up to the hierarchy's root
        d = base + "/" + path.strip("/") if path.strip("/") else base
        while True:
            limit = _cgroup_dir_limit(d, version)
            if limit is not None and (best is None or limit < best):
                best = limit
            if len(d) <= len(base):
                break
            d = os.path.dirname(d)
    return best


def _cgroup_dir_limit(directory: str, version: str) -> int | None:
    try:
        if version == "v2":
            with open(os.path.join(directory, "cpu.max")) as fh:
                quota, _, period = fh.read().strip().partition(" ")
            if quota == "max":
                return None
            q, p = int(quota), int(period or 100000)
        else:
            with open(os.path.join(directory, "cpu.cfs_quota_us")) as fh:
                q = int(fh.read().strip())
            with open(os.path.join(directory, "cpu.cfs_period_us")) as fh:
                p = int(fh.read().strip())
    except (OSError, ValueError):
        return None
    if q <= 0 or p <= 0:
        return None
    return max(1, -(-q // p))


def _host_threads() -> tuple[int, bool]:
    """(limit, is_override): $TENSORFFI_NUM_THREADS, else the smallest of
    $OMP_NUM_THREADS (its first entry), the CPU affinity and the cgroup quota."""
    env = _positive_int(os.environ.get("TENSORFFI_NUM_THREADS"))
    if env:
        return env, True
    limits = [int(lib.tf_cpu_count())]
    omp = _positive_int(os.environ.get("OMP_NUM_THREADS", "").split(",")[0])
    if omp:
        limits.append(omp)
    quota = _cgroup_cpu_limit()
    if quota:
        limits.append(quota)
    return max(1, min(limits)), False


def _reset_after_fork() -> None:
    _thread_state[1] = None


os.register_at_fork(after_in_child=_reset_after_fork)


def get_num_threads() -> int:
    """Threads tensorffi's kernels use by default.

    :func:`set_num_threads`, else ``$TENSORFFI_NUM_THREADS``, else the smallest of
    ``torch.get_num_threads()``, ``$OMP_NUM_THREADS``, the CPUs this process may run on
    and its cgroup CPU quota. A kernel uses fewer where the work is too small to pay
    for more (small calls run on the calling thread).

    >>> import tensorffi
    >>> tensorffi.get_num_threads() >= 1
    True
    """
    n: int | None = _thread_state[0]
    if n:
        return n
    host: int | None = _thread_state[1]
    if host is None:
        host, _thread_state[2] = _host_threads()
        _thread_state[1] = host
    if _thread_state[2]:
        return host
    torch_threads = _torch_threads[0]
    if torch_threads is None:
        mod = sys.modules.get("torch")  # never imported here: only followed if in use
        if mod is None:
            return host
        torch_threads = _torch_threads[0] = mod.get_num_threads
    t: int = torch_threads()
    return t if 0 < t < host else host


def set_num_threads(n: int | None) -> None:
    """Set the thread count of tensorffi's kernels for the whole process (None: default)."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ArgumentValueError(f"set_num_threads expects a positive integer or None, got {n!r}")
    _thread_state[0] = n


def resolve_threads(threads: int | None) -> int:
    """A kernel's ``threads=`` argument: None means get_num_threads()."""
    if threads is None:
        return get_num_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ArgumentValueError(f"threads must be a positive integer or None, got {threads!r}")
    return threads
