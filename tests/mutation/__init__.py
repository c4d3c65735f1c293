# SPDX-License-Identifier: MIT
"""Mutation testing: planted bugs that the tests must catch (see tests/README.md).

    python -m tests.mutation                 # every mutant, one at a time
    python -m tests.mutation -j 2 --only ID  # some, two at a time
    python -m pytest -m mutation             # the same, one pytest test per mutant
"""
