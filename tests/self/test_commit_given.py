"""SPECGATE_COMMIT vouches for a copy without .git; on a git checkout with changes it is refused
as a dirty tree is without it, naming the changed paths (it had stored figures naming a clean
commit that could not reproduce them)."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

from specgate import project
from specgate.cli.guards import dirty_tree_refusal
from specgate.provenance import git_commit

GIVEN = "efa29302b81e68ea08d90afb13de5eecf9d4a1bd"


def _in(folder, monkeypatch) -> None:
    monkeypatch.delenv("SPECGATE_ALLOW_DIRTY", raising=False)
    monkeypatch.setenv("SPECGATE_COMMIT", GIVEN)
    monkeypatch.chdir(folder)
    project.use(None)


def test_specgate_commit_on_a_dirty_checkout_is_refused_naming_the_changed_paths(tmp_path, monkeypatch):
    def git(*words: str) -> None:
        subprocess.run(["git", *words], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "specgate.toml").write_text('deployment = "sim"\n')  # the project is this folder
    (tmp_path / "model.py").write_text("speed = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "project")
    _in(tmp_path, monkeypatch)
    try:
        assert git_commit() == GIVEN and dirty_tree_refusal("specgate baseline update", SimpleNamespace(input_files=())) is None
        (tmp_path / "model.py").write_text("speed = 2\n")
        assert git_commit() == f"{GIVEN}+dirty"
        refused = dirty_tree_refusal("specgate baseline update", SimpleNamespace(input_files=()))
        assert refused is not None and refused.startswith("specgate baseline update refused: the tree is dirty")
        assert "changed: model.py" in refused and "SPECGATE_COMMIT names a commit" in refused
        monkeypatch.setenv("SPECGATE_COMMIT", f"{GIVEN}+dirty")  # said dirty by the caller: said once
        assert git_commit() == f"{GIVEN}+dirty"
    finally:
        project.use(None)


def test_specgate_commit_still_names_a_copy_without_git(tmp_path, monkeypatch):
    (tmp_path / "specgate.toml").write_text('deployment = "sim"\n')
    (tmp_path / "model.py").write_text("speed = 1\n")
    _in(tmp_path, monkeypatch)
    try:
        assert git_commit() == GIVEN
        assert dirty_tree_refusal("specgate baseline update", SimpleNamespace(input_files=(tmp_path / "model.py",))) is None
    finally:
        project.use(None)


def test_specgate_commit_in_a_checkout_without_commits_is_no_clean_commit(tmp_path, monkeypatch):
    """Round 3: in a repository with no commit yet, SPECGATE_COMMIT was taken as a clean commit."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "specgate.toml").write_text('deployment = "sim"\n')
    _in(tmp_path, monkeypatch)
    try:
        assert git_commit() == f"{GIVEN}+dirty"
        assert dirty_tree_refusal("specgate baseline update", SimpleNamespace(input_files=())) is not None
    finally:
        project.use(None)
