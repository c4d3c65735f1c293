# SPDX-License-Identifier: MIT
"""A pytest plugin that puts tensorffi.signal in place of scipy.signal's sosfilt family.

Loaded with ``-p scipy_signal_plugin`` (this folder on the import path) by
tests/test_signal_scipy_suite.py, which runs SciPy's own test file
(``scipy/signal/tests/test_signaltools.py``) in a subprocess. At configure time,
before SciPy's test module imports ``from scipy.signal import sosfilt, ...``, it
replaces ``sosfilt``, ``sosfilt_zi`` and ``sosfiltfilt`` in ``scipy.signal`` (and in
``scipy.signal._signaltools``, which SciPy's own ``sosfiltfilt`` and tests reach)
and gives tensorffi's functions SciPy's entries in the array-API capabilities table
that ``make_xp_test_case`` reads.
"""
from __future__ import annotations

import pytest

import tensorffi.signal as tsig

NAMES = ("sosfilt", "sosfilt_zi", "sosfiltfilt")


def pytest_configure(config: pytest.Config) -> None:
    import scipy.signal
    import scipy.signal._signaltools as signaltools
    from scipy._lib import _array_api

    table = _array_api.xp_capabilities_table
    for name in NAMES:
        theirs, ours = getattr(scipy.signal, name), getattr(tsig, name)
        if theirs in table:
            table[ours] = table[theirs]
        setattr(scipy.signal, name, ours)
        if hasattr(signaltools, name):
            setattr(signaltools, name, ours)
    config.stash[_KEY] = True


_KEY = pytest.StashKey[bool]()


def pytest_report_header(config: pytest.Config) -> str:
    return "scipy.signal.sosfilt, sosfilt_zi, sosfiltfilt: tensorffi.signal's (tests/scipy_signal_plugin.py)"
