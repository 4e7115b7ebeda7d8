"""The user's project: where their deployments, baselines and reports live.

specgate runs in two kinds of place. In its own checkout (this repository) the deployments
are `fixtures/deployments`, the baselines `baselines/`, and nothing needs configuring. In a
user's repository that installed specgate, a `specgate.toml`, or a `[tool.specgate]` table in
`pyproject.toml`, says where theirs are; it is looked for in the folder pytest or the CLI
starts from and upwards (as git looks for `.git`), and every path in it is relative to the
file that holds it:

    deployment = "deployments/mine.toml"   # the default deployment: a path, or a built-in name (sim)
    deployments = "deployments"            # where `specgate run NAME` looks first (then the built-ins)
    baselines = "baselines"                # stored baselines (commit them)
    report_dir = "specgate-report"         # report, logs, benchmark JSON (ignore it in git)
    gate = true                            # a plain `pytest` there collects the gate tests too

Without such a file, the checkout's layout applies when specgate runs from its own source,
and the current folder's `baselines/`, `deployments/` otherwise.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from specgate.errors import DeploymentError
from specgate.resources import SOURCE_ROOT, builtin_deployments_dir
from specgate.tomlcheck import Table, read_toml

SETTINGS_FILE = "specgate.toml"
DEFAULT_REPORT_DIR = "specgate-report"


@dataclass(frozen=True)
class Project:
    root: Path  # the folder `{repo}` names, servers start in, and git describes
    settings_file: Path | None  # where the settings came from (None: the layout's defaults)
    deployment: str | None  # the default deployment, as a name or an absolute path
    deployments_dir: Path
    baselines_dir: Path
    report_dir: Path
    gate: bool  # a plain `pytest` collects the gate tests

    def describe(self) -> str:
        where = str(self.settings_file) if self.settings_file else "no specgate.toml: defaults"
        return f"project {self.root} ({where})"


def _settings_in(folder: Path) -> tuple[Path, dict] | None:
    """The settings table in `folder`, or None. A specgate.toml wins over pyproject.toml."""
    own = folder / SETTINGS_FILE
    if own.exists():  # a folder or FIFO of that name is named, not silently passed over
        return own, read_toml(own)
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError, RecursionError):
            return None  # not ours to judge: pip and pytest report a broken pyproject.toml themselves
        tool = data.get("tool")
        if isinstance(tool, dict) and "specgate" in tool:
            table = tool["specgate"]
            if not isinstance(table, dict):
                raise DeploymentError(pyproject, "tool.specgate", "expected a table ([tool.specgate])")
            return pyproject, table
    return None


def find_project(start: Path, *more: Path) -> Project:
    """The project `start` belongs to (else the first of `more` that has settings).
    DeploymentError names the settings file and field of anything wrong in it."""
    start = start.resolve()
    for origin in (start, *(m.resolve() for m in more)):
        for folder in (origin, *origin.parents):
            found = _settings_in(folder)
            if found is not None:
                return _from_settings(folder, *found)
            if (folder / ".git").exists():
                break  # a repository's settings are inside it: never a parent folder's, another project's
    if SOURCE_ROOT is not None:
        # specgate's own checkout (or code run from it): its layout, wherever the caller stands.
        return Project(
            SOURCE_ROOT,
            None,
            None,
            builtin_deployments_dir(),
            SOURCE_ROOT / "baselines",
            start / DEFAULT_REPORT_DIR,
            gate=False,
        )
    return Project(start, None, None, start / "deployments", start / "baselines", start / DEFAULT_REPORT_DIR, False)


def _from_settings(folder: Path, path: Path, data: dict) -> Project:
    prefix = "tool.specgate." if path.name == "pyproject.toml" else ""
    t = Table(data, path, prefix)
    deployment = t.text("deployment", None)
    if deployment is not None and not deployment.strip():
        raise t.error("deployment", "is empty: give a built-in name (sim) or a .toml path")
    if deployment is not None and (deployment.endswith(".toml") or "/" in deployment):
        deployment = str((folder / deployment).resolve())
    folders = {}
    for key, default in (("deployments", "deployments"), ("baselines", "baselines"), ("report_dir", DEFAULT_REPORT_DIR)):
        # "~/x" is the user's home as a shell reads it (a literal "~" folder invites `rm -rf ~`).
        where = (folder / Path(t.text(key, default)).expanduser()).resolve()
        # A folder, or none yet (made when first written); never a file (README.md once passed).
        if where.exists() and not where.is_dir():
            raise t.error(key, f"expected a folder, got {where}, which is no folder")
        folders[key] = where
    project = Project(
        root=folder,
        settings_file=path,
        deployment=deployment,
        deployments_dir=folders["deployments"],
        baselines_dir=folders["baselines"],
        report_dir=folders["report_dir"],
        gate=t.flag("gate", True),
    )
    t.reject_unknown()
    return project


_current: Project | None = None


def current() -> Project:
    """The project of this process: the one pytest's plugin found from its rootdir, else the
    one the current folder belongs to."""
    global _current
    if _current is None:
        _current = find_project(Path.cwd())
    return _current


def use(project: Project | None) -> None:
    """Make `project` the current one (None: find it again from the current folder)."""
    global _current
    _current = project
