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
    """Runs started here record themselves in folders of this session's, not the user's cache or
    the machine's registry (where another session's runs would reap, or be reaped by, these)."""
    import os

    from specgate.server.orphans import MACHINE_DIR_ENV, STATE_DIR_ENV

    old = {name: os.environ.get(name) for name in (STATE_DIR_ENV, MACHINE_DIR_ENV)}
    os.environ[STATE_DIR_ENV] = str(tmp_path_factory.mktemp("run-records"))
    os.environ[MACHINE_DIR_ENV] = str(tmp_path_factory.mktemp("machine-run-records"))
    yield
    for name, value in old.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
