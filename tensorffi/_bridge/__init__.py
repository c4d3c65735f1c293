# SPDX-License-Identifier: MIT
"""The bridge's parts (see :mod:`tensorffi.bridge`): array and scalar rules, structs,
callbacks, the generated Python path and the lowering to the native call path."""
