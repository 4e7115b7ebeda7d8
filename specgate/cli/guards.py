"""Refusals before anything boots: missing credentials, an unwritable baselines folder, a dirty tree for stored figures."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from specgate import project
from specgate.deployment import Deployment


def missing_credentials(dep: Deployment) -> bool:
    """Said (as errors) before anything boots: a server without its key, or a url without its
    password, would only fail every test after the boots."""
    from specgate.preflight import credential_problems

    problems = credential_problems(dep)
    for problem in problems:
        print(f"specgate: error: {problem}", file=sys.stderr)
    return bool(problems)


def unwritable_baselines(args: argparse.Namespace, dep: Deployment) -> str | None:
    """Checked before anything boots: an update whose figures cannot be stored is not worth its run."""
    from specgate.atomic import ensure_writable

    root = Path(args.baselines_dir).resolve() if args.baselines_dir else project.current().baselines_dir
    source = "--baselines-dir" if args.baselines_dir else "the project's baselines folder"
    try:
        ensure_writable(root / dep.name)
    except OSError as exc:
        return f"{source} ({root}): the baseline update could not store its figures there: {exc}"
    return None


def dirty_tree_refusal(what: str, dep: Deployment) -> str | None:
    """Stored figures name the commit that made them; a dirty tree has no such commit, nor has a
    clean one whose deployment file (or a file it names) is untracked or modified. Under
    SPECGATE_ALLOW_DIRTY the record says "+dirty" and the paths, and the terminal says so."""

    from specgate.provenance import dirty_inputs, dirty_tree_paths, git_commit, why_no_commit

    commit = git_commit(dep.input_files)
    dirty = dirty_inputs(dep.input_files)
    paths = f"; not in it as they are: {', '.join(dirty)}" if dirty else ""
    if not (commit.endswith("+dirty") or commit == "unknown"):
        return None
    if os.environ.get("SPECGATE_ALLOW_DIRTY"):
        if dirty:
            print(f"specgate: warning: {what} records commit {commit}{paths} (SPECGATE_ALLOW_DIRTY)", file=sys.stderr)
        return None
    escapes = "SPECGATE_COMMIT on a copy without .git, or SPECGATE_ALLOW_DIRTY=1 for a throwaway record"
    if commit.removesuffix("+dirty") == "unknown":  # staged files in a repository without commits are "dirty"
        state = why_no_commit()
        first = "make a first commit (git add, git commit)" if "no commits yet" in state else "run it in a git checkout"
        return (
            f"{what} refused: the tree is {state}, so no commit would name what produced the figures (a stored "
            f"record carries the commit it was measured at, and later runs show it beside their own); {first} "
            f"(or set {escapes})"
        )
    changed = dirty_tree_paths()  # none where no git answers (a copy without .git)
    if changed and not dirty:
        paths += f"; changed: {', '.join(changed)}"
    if os.environ.get("SPECGATE_COMMIT", "").strip():
        paths += "; SPECGATE_COMMIT names a commit, and this git checkout is not that commit as it is"
    return (
        f"{what} refused: the tree is dirty ({commit}{paths}), so no commit would name what produced the figures; "
        f"commit first (git add the deployment and the files it names), or set {escapes}"
    )
