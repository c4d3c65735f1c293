# SPDX-License-Identifier: MIT
"""Sphinx configuration of tensorffi's API reference (built in CI by `.ci/run`'s docs step).

The reference is generated from the docstrings (autodoc); nothing is written twice.
"""
from __future__ import annotations

import tensorffi

project = "tensorffi"
author = "the tensorffi authors"
release = version = tensorffi.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.intersphinx"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# No default "members": every directive says which members it documents (Sphinx 9
# lets a default "members": True override a directive's explicit list, which documented
# every name of tensorffi.__all__ a second time).
autodoc_default_options = {"undoc-members": False, "show-inheritance": True}
napoleon_numpy_docstring = False
napoleon_google_docstring = True
napoleon_use_ivar = True  # "Attributes:" as fields: no second description of a property
# Cross-references to the peers' documentation are resolved offline (no network in CI):
# unresolved ones stay plain text.
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
nitpicky = False
html_theme = "alabaster"
exclude_patterns = ["_build"]
