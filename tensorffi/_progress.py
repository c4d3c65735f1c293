# SPDX-License-Identifier: MIT
"""Progress bars that fit the host: the one mechanism behind every ``progress=True``.

Every kernel that reports progress (``physics.nbody``, ``io.read_csv``,
``core.count``) draws its bar through :class:`Bar`, which picks the bar once, when
it first draws:

* a widget bar (``tqdm.notebook``) in a Jupyter kernel where ``ipywidgets`` is
  installed;
* otherwise tqdm's plain text bar on stderr (a terminal, a script, a log, or a
  notebook without ipywidgets), redrawn at most twice a second
  (``mininterval=0.5``), so a long run writes a handful of lines, not hundreds.

Nothing imports ``tqdm.auto``, whose import warns ("IProgress not found") in a
notebook without ipywidgets. ``TENSORFFI_PROGRESS=text`` (or ``widget``) forces a
kind. Counts are integers (``37/1000 steps``, bytes for ``read_csv``); a bar only
moves forward, never past its total; closed after a complete run it reads 100%,
closed after a run that stopped early (Ctrl-C, an exception) it keeps the last value
C reached — the bar never claims work that was not done.

>>> bar = Bar("demo", "step")
>>> for done in (0, 3, 10):
...     bar(done, 10)
>>> bar.n, bar.total
(10, 10)
>>> bar.close()
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Any

__all__ = ["Bar", "bar_kind"]

#: Seconds between redraws of a text bar (at most ~2 updates a second) and a widget.
TEXT_INTERVAL = 0.5
WIDGET_INTERVAL = 0.25


def _in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel attached)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # pragma: no cover - a broken IPython
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def bar_kind() -> str:
    """``"widget"`` or ``"text"``: the bar :class:`Bar` draws in this process now."""
    forced = os.environ.get("TENSORFFI_PROGRESS", "").strip().lower()
    if forced in ("text", "widget"):
        return forced
    if _in_kernel() and importlib.util.find_spec("ipywidgets") is not None:
        return "widget"
    return "text"


def _tqdm(kind: str) -> Any:
    if kind == "widget":
        try:
            from tqdm.notebook import IProgress, tqdm as notebook_tqdm

            if IProgress is not None:
                return notebook_tqdm
        except ImportError:  # pragma: no cover - ipywidgets that does not import
            pass
    from tqdm.std import tqdm as text_tqdm

    return text_tqdm


class Bar:
    """A progress bar fed ``(done, total)`` reports: a ``progress=`` callable.

    Create it when the work starts (the rate counts from then); the bar itself
    appears at the first report.

    ``unit_scale=True`` shows SI prefixes (``12.3MB``) for byte counts; ``scale``
    multiplies the reported counts (rounded to integers).
    """

    def __init__(self, desc: str | None = None, unit: str = "it", *, unit_scale: bool = False,
                 unit_divisor: int = 1000, scale: float = 1.0) -> None:
        self.desc = desc
        self.unit = unit
        self.unit_scale = unit_scale
        self.unit_divisor = unit_divisor
        self.scale = scale
        self._start = time.time()  # the work starts now: the rate counts from here, not from the first report
        self._bar: Any = None
        self.n = 0  # the count reached so far
        self.total: int | None = None

    def _count(self, value: Any) -> int:
        v = int(value) if self.scale == 1.0 else int(round(value * self.scale))
        return max(v, 0)

    def __call__(self, done: Any, total: Any) -> None:
        # total None: not known yet (a stream), a counter without a percentage
        done, total = self._count(done), None if total is None else self._count(total)
        bar = self._bar
        if bar is None:
            kind = bar_kind()
            cls = _tqdm(kind)
            bar = self._bar = cls(
                total=total, desc=self.desc, unit=self.unit, unit_scale=self.unit_scale,
                unit_divisor=self.unit_divisor, mininterval=WIDGET_INTERVAL if kind == "widget" else TEXT_INTERVAL,
                dynamic_ncols=True, smoothing=0,  # the rate is the average since the start
            )
            bar.start_t = bar.last_print_t = min(self._start, bar.start_t)
        elif total != bar.total:
            bar.total = total
        self.total = total
        step = (done if total is None else min(done, total)) - bar.n
        if step > 0:
            bar.update(step)
            self.n = int(bar.n)

    def close(self) -> None:
        """Draw the last value reached and end the bar (idempotent)."""
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()
