# SPDX-License-Identifier: MIT
"""An exception raised in the extern "Python" progress callback outside
CallbackScope.report (Ctrl-C arrives at the callback's first bytecode) must stop C
and reach the caller, not be printed and swallowed by cffi."""
from __future__ import annotations

import pytest

import tensorffi
from tensorffi._callbacks import CallbackScope


class Boom(Exception):
    pass


@pytest.mark.parametrize("exc", [KeyboardInterrupt, Boom])
def test_exception_outside_report_stops_c_and_reaches_the_caller(monkeypatch, exc):
    calls = []

    def report(self, done, total):
        calls.append(done)
        raise exc("raised where report's own try cannot see it")

    monkeypatch.setattr(CallbackScope, "report", report)
    with pytest.raises(exc):
        tensorffi.core.count(100, 10)
    assert calls == [10]  # C stopped at the first report


def test_reports_still_work():
    seen = []
    assert tensorffi.core.count(100, 4, lambda d, t: seen.append((d, t))) == 100
    assert seen == [(25, 100), (50, 100), (75, 100), (100, 100)]
