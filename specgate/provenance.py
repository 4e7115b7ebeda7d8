"""Where a figure came from: date, commit, host, command, versions."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from specgate import __version__, hardware, project
from specgate.envvars import injected_faults
from specgate.errors import SpecgateError


def commit_info_from_environment() -> dict[str, str]:
    """What a copy of the tree without git says of the commit SPECGATE_COMMIT names:
    SPECGATE_COMMIT_TIME (its committer time, ISO 8601: `git show -s --format=%cI COMMIT`) and
    SPECGATE_BRANCH, for pytest-benchmark's commit_info. Either without SPECGATE_COMMIT, or a time
    that is not ISO 8601 with a zone, is refused: it would describe no commit, or none exactly."""
    given = {k: os.environ[k].strip() for k in ("SPECGATE_COMMIT_TIME", "SPECGATE_BRANCH") if os.environ.get(k, "").strip()}
    if given and not os.environ.get("SPECGATE_COMMIT", "").strip():
        raise SpecgateError(f"{' and '.join(given)} set without SPECGATE_COMMIT: they describe no named commit")
    out: dict[str, str] = {}
    if "SPECGATE_COMMIT_TIME" in given:
        value = given["SPECGATE_COMMIT_TIME"]
        try:
            zoned = _dt.datetime.fromisoformat(value).tzinfo is not None
        except ValueError:
            zoned = False
        if not zoned:
            raise SpecgateError(
                f"SPECGATE_COMMIT_TIME={value!r}: expected the commit's ISO 8601 time with its zone "
                "(git show -s --format=%cI COMMIT, e.g. 2026-12-01T22:41:00+00:00)"
            )
        out["time"] = out["author_time"] = value  # a copy knows one time; git's two differ only after a rebase
    if "SPECGATE_BRANCH" in given:
        out["branch"] = given["SPECGATE_BRANCH"]
    return out


def dirty_inputs(paths: Iterable[Path]) -> list[str]:
    """Each of `paths` (the deployment file and the files it names) that the project's HEAD does
    not hold as it is now: "PATH (untracked)", "(modified)", or "(outside the repository)". The
    tree's own status leaves untracked files out (scratch files are everywhere), but a figure made
    from an untracked deployment names a commit that cannot reproduce it. Files shipped inside the
    specgate package are named by its version instead; SPECGATE_COMMIT vouches for the whole tree
    of a copy without .git only (`vouched_by_environment`)."""
    if vouched_by_environment():
        return []
    root = project.current().root.resolve()
    package = Path(__file__).resolve().parent
    found = []
    for path in dict.fromkeys(Path(p).resolve() for p in paths):
        if not path.is_relative_to(root):
            if not path.is_relative_to(package):
                found.append(f"{path} (outside the repository {root})")
            continue
        try:
            tracked = subprocess.run(
                ["git", "ls-files", "--error-unmatch", "--", str(path)], cwd=root, capture_output=True, timeout=10
            ).returncode == 0
            changed = tracked and bool(
                subprocess.run(
                    ["git", "status", "--porcelain", "--", str(path)], cwd=root, capture_output=True, text=True, timeout=10
                ).stdout.strip()
            )
        except (OSError, subprocess.SubprocessError):
            return []  # no git here: git_commit says "unknown" for the whole tree
        shown = path.relative_to(root)
        if not tracked:
            found.append(f"{shown} (untracked)")
        elif changed:
            found.append(f"{shown} (modified)")
    return found


def vouched_by_environment() -> bool:
    """SPECGATE_COMMIT is set and the project is no git checkout (a copy without .git: the GPU
    host), so nothing but the variable can say which commit the tree is. In a checkout the
    variable still names the commit, but git says whether the tree is that commit as it is: set on
    a dirty checkout, it had made a record of uncommitted changes name a clean commit."""
    return bool(os.environ.get("SPECGATE_COMMIT", "").strip()) and not _git_checkout(project.current().root)


def _git_checkout(root: Path) -> bool:
    try:
        inside = subprocess.run(
            ["git", "rev-parse", "--is-inside-work-tree"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return inside.returncode == 0 and inside.stdout.strip() == "true"


def git_commit(inputs: Iterable[Path] = ()) -> str:
    """The project's HEAD (+dirty), or SPECGATE_COMMIT where it is set (+dirty where the project is
    a git checkout whose tree is not that commit as it is: `vouched_by_environment`). The project is
    what the figures judge: this checkout, or the user's repository. `inputs` (the deployment's
    files) make it dirty too where HEAD does not hold them (dirty_inputs)."""
    given = os.environ.get("SPECGATE_COMMIT", "").strip()
    if given and vouched_by_environment():
        return given
    commit = _head_commit()
    if not commit.endswith("+dirty") and commit != "unknown" and dirty_inputs(inputs):
        commit += "+dirty"
    if given:
        # A checkout whose HEAD holds no commit yet (or not the tree as it is) is no commit's tree.
        clean = commit != "unknown" and not commit.endswith("+dirty")
        return given if given.endswith("+dirty") or clean else given + "+dirty"
    return commit


def _head_commit() -> str:
    root = project.current().root
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        # A repository without commits prints nothing useful (or "HEAD") and fails: no commit names it.
        head = (
            rev.stdout.strip() if rev.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", rev.stdout.strip()) else ""
        )
        dirty = any(line.strip() for line in _tracked_changes(root))
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def _tracked_changes(root: Path) -> list[str]:
    """git status's lines for the tracked files changed under `root`. The runner history
    (verdicts/history.py) is what passing runs append, not what produced the figures: a tree
    changed only there is clean, or the next baseline update is refused."""
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude,glob)**/history/*.json"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout.splitlines()


def dirty_tree_paths(limit: int = 5) -> list[str]:
    """The tracked paths that make the tree dirty (git status's own list, the history excluded as
    in git_commit), at most `limit` and a count of the rest: a refusal names them, since the dirt
    may be specgate's own (a replay file a failed run appended cases to)."""
    try:
        listed = _tracked_changes(project.current().root)
    except (OSError, subprocess.SubprocessError):
        return []
    paths = [line[3:] for line in listed if len(line) > 3]
    return paths[:limit] + ([f"{len(paths) - limit} more"] if len(paths) > limit else [])


def why_no_commit() -> str:
    """Why git_commit() is "unknown": the project is no git checkout, or one without commits yet
    (`git init` alone), which is told apart because its fix differs (a first commit, not a clone)."""
    root = project.current().root
    try:
        inside = subprocess.run(
            ["git", "rev-parse", "--is-inside-work-tree"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"not a git checkout (git could not be run: {exc})"
    if inside.returncode == 0 and inside.stdout.strip() == "true":
        return f"a git repository with no commits yet ({root})"
    return f"not a git checkout ({root})"


def host_id() -> str:
    """Tells machines apart where host names do not (lent GPU machines are all called "vm"):
    the GPUs' own UUIDs where a GPU answers, else a digest of /etc/machine-id."""
    try:
        uuids = hardware.gpu_uuids()
    except SpecgateError:  # a GPU host without NVML bindings: the fingerprint says so where it matters
        uuids = None
    if uuids:
        return ",".join(uuids)
    try:
        import hashlib

        return "machine-id:" + hashlib.sha256(Path("/etc/machine-id").read_bytes()).hexdigest()[:16]
    except OSError:
        return "unknown"


# Where the servers were attached by url, this host only sent the requests: its name and GPUs are
# the client's, and the servers' machine is known only by what the servers say of themselves.
URL_SERVERS = (
    "attached by url: the servers ran on their own machine, whose hardware this client does not know "
    "(host and host_id are the client's; the fingerprint holds what the servers' /get_server_info tells)"
)


def provenance(command: list[str] | None = None, launcher: str = "local", inputs: Iterable[Path] = ()) -> dict:
    """`inputs`: the deployment's files; those HEAD does not hold are listed as "dirty_inputs"."""
    inputs = tuple(inputs)
    said: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commit": git_commit(inputs),
        "host": platform.node(),
        "host_id": host_id(),
        "python": platform.python_version(),
        "specgate": __version__,
        "command": " ".join(command if command is not None else sys.argv),
    }
    if launcher == "url":
        said["servers"] = URL_SERVERS
    if (faults := injected_faults(os.environ)) is not None:
        said["sim_faults"] = faults  # the figures are a fault's on purpose: the report says which
    if dirty := dirty_inputs(inputs):
        said["dirty_inputs"] = dirty
    return said
