"""Fixtures for the self-tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import SimDeployment


@pytest.fixture
def sim_deployment(tmp_path: Path) -> Callable[..., SimDeployment]:
    made: list[SimDeployment] = []

    def make(overrides: dict | None = None, fast: bool = True) -> SimDeployment:
        d = SimDeployment(tmp_path / f"d{len(made)}", overrides or {}, fast)
        made.append(d)
        return d

    yield make
    # Whatever a test did, it must leave no server behind.
    for d in made:
        assert not d.leftovers(), f"processes left behind: {d.leftovers()}"
