"""Fixtures for the self-tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import SimDeployment

# Most end-to-end self-tests start a fresh pytest and three simulator servers. Where the
# environment sets PYTHONDONTWRITEBYTECODE (this project's CPU machines do), none of them keeps a
# bytecode cache, so every one compiles again, and pytest rewrites the asserts again, in some 130
# modules of specgate and Hypothesis: 2.4 s of CPU of a run's 12.7 on the 2-core machine. The
# caches go to ignored __pycache__ folders, written atomically (workers may race for one).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


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


@pytest.fixture(autouse=True, scope="session")
def _private_run_records(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs started here record themselves in a folder of this session's, not the user's cache."""
    import os

    from specgate.server.orphans import STATE_DIR_ENV

    old = os.environ.get(STATE_DIR_ENV)
    os.environ[STATE_DIR_ENV] = str(tmp_path_factory.mktemp("run-records"))
    yield
    if old is None:
        os.environ.pop(STATE_DIR_ENV, None)
    else:
        os.environ[STATE_DIR_ENV] = old
