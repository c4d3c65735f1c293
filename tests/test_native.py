# SPDX-License-Identifier: MIT
"""Native smoke tests: the module imports, its version stamp matches, errors flow."""
from __future__ import annotations

import threading

import pytest

import tensorffi
from tensorffi._lib import ffi, last_error, lib


def test_version_stamp_matches_package():
    assert ffi.string(lib.tf_version()).decode() == tensorffi.__version__
    assert tensorffi.info()["native_version"] == tensorffi.__version__


def test_info_reports_build_facts():
    facts = tensorffi.info()
    assert facts["simd"] in ("scalar", "avx2", "avx512")
    assert "-Werror" in facts["build_flags"]
    assert facts["cpu_count"] >= 1 and facts["threads"] >= 1


def test_error_message_is_thread_local():
    with pytest.raises(tensorffi.errors.InvalidArgumentError, match="n must be >= 0, got -7"):
        tensorffi.core.raw.tf_core_iota_i64(tensorffi.core.iota(n=1), -7)
    seen = []

    def other():
        seen.append(last_error())

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [""]
    assert "got -7" in last_error()
