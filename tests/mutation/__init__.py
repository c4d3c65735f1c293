# SPDX-License-Identifier: MIT
"""Mutation testing: planted bugs that the tests must catch (see tests/README.md).

    python -m tests.mutation                 # every mutant, -j = the CPUs
    python -m tests.mutation -j 1 --only ID  # some, one at a time
    python -m pytest -m mutation             # the same, one pytest test per mutant
"""
