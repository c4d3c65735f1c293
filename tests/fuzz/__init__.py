# SPDX-License-Identifier: MIT
"""Fuzzing harnesses: CSV (csvfuzz) and the bridge (tests/test_fuzz_bridge.py).

    python -m tests.fuzz --seconds 3600            # an hour, fresh seeds
    python -m tests.fuzz --seconds 120 --seed 1    # what CI runs (also under ASan)

See tests/README.md ("Fuzzing").
"""
