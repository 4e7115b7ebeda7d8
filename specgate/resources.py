"""specgate's own files: the gate tests, the prompt sets, the built-in deployments.

From a source checkout (this repository, an editable install, or a copy on a GPU host run
with PYTHONPATH) they are the checkout's `tests/gate`, `fixtures/prompts` and
`fixtures/deployments`. An installed wheel carries copies of the same folders inside the
package (`specgate/_gate`, `specgate/_fixtures`: pyproject.toml maps them there), so a user's
repository needs none of this one's layout. Wheels are installed as files; a zipped install
is not supported (pytest must collect the gate tests from disk).
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# The checkout this package was imported from, or None for an installed wheel.
_root = PACKAGE_DIR.parent
SOURCE_ROOT: Path | None = (
    _root if (_root / "fixtures" / "prompts").is_dir() and (_root / "tests" / "gate").is_dir() else None
)


def _pick(in_checkout: tuple[str, ...], shipped: tuple[str, ...]) -> Path:
    if SOURCE_ROOT is not None:
        return SOURCE_ROOT.joinpath(*in_checkout)
    return PACKAGE_DIR.joinpath(*shipped)


def gate_tests_dir() -> Path:
    """The gate's pytest files (tests/gate in the checkout)."""
    return _pick(("tests", "gate"), ("_gate",))


def prompts_dir() -> Path:
    """The built-in prompt sets, one JSONL file per set."""
    return _pick(("fixtures", "prompts"), ("_fixtures", "prompts"))


def builtin_deployments_dir() -> Path:
    """The deployments specgate ships (`sim`, the simulator, among them)."""
    return _pick(("fixtures", "deployments"), ("_fixtures", "deployments"))


def builtin_baselines_dir() -> Path:
    """Stored baselines specgate ships: the simulator's, which `specgate init` copies."""
    return _pick(("baselines",), ("_fixtures", "baselines"))
