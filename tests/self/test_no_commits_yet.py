"""A folder with `git init` and no commits is a git repository without commits, not "not a git
checkout": the refusal says so and what a first commit gives the stored records."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from specgate.resources import SOURCE_ROOT as REPO_ROOT


@pytest.mark.parametrize("staged", [False, True])
def test_a_repository_without_commits_is_told_apart_from_no_checkout(tmp_path, staged):
    env = {k: v for k, v in os.environ.items() if k not in ("SPECGATE_COMMIT", "SPECGATE_ALLOW_DIRTY")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    cli = [sys.executable, "-m", "specgate.cli"]
    subprocess.run([*cli, "init"], cwd=tmp_path, env=env, check=True, capture_output=True)
    if staged:
        subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    run = subprocess.run([*cli, "baseline", "update"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout[-2000:]
    assert "a git repository with no commits yet" in run.stderr and "make a first commit" in run.stderr, run.stderr
    assert "not a git checkout" not in run.stderr and "dirty" not in run.stderr


def test_a_folder_outside_git_is_still_not_a_git_checkout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SPECGATE_COMMIT", "SPECGATE_ALLOW_DIRTY")}
    env.update(PYTHONPATH=str(REPO_ROOT), GIT_CEILING_DIRECTORIES=str(tmp_path.parent))
    cli = [sys.executable, "-m", "specgate.cli"]
    subprocess.run([*cli, "init"], cwd=tmp_path, env=env, check=True, capture_output=True)
    run = subprocess.run([*cli, "baseline", "update"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "not a git checkout" in run.stderr, run.stderr
