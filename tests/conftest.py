# SPDX-License-Identifier: MIT
"""Shared fixtures: input kinds (torch, NumPy) and a fresh random generator."""
from __future__ import annotations

import numpy as np
import pytest
import torch


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, randomly seeded generator; the seed is printed on failure."""
    seed = int(np.random.SeedSequence().entropy % (2**32))
    print(f"rng seed = {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(params=["torch", "numpy"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


def as_kind(array: np.ndarray, kind: str):
    """``array`` as a torch tensor or a NumPy array (a copy, so tests own it)."""
    return torch.from_numpy(array.copy()) if kind == "torch" else array.copy()


def to_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
