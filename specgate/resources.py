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


# The stored baselines the wheel ships, by deployment folder: the files of each it packs
# (pyproject.toml's package-data for specgate._fixtures.baselines lists the same globs;
# tests/self/test_project.py holds the two alike). `specgate init` copies the simulator's by these
# too, so a copy from a checkout holds what a wheel's would, never a file a run left there.
SHIPPED_BASELINES: dict[str, tuple[str, ...]] = {
    "sim": ("*.json", "equivalence/replay.json"),
    "kimi-k2.5-rtxpro6000-tp8-sim": ("*.json",),
}


def shipped_baseline_files(deployment: str) -> list[Path]:
    """The files of `deployment`'s stored baseline that specgate ships, as they are here."""
    folder = builtin_baselines_dir() / deployment
    return sorted({path for pattern in SHIPPED_BASELINES.get(deployment, ()) for path in folder.glob(pattern)})


def package_data(path: Path) -> bool:
    """Whether `path` is specgate's own data, what the wheel ships (the simulator's stored
    baselines among it): a run reads it but never writes there, or a demo run in this checkout
    would leave its failing cases in the next wheel and in every `specgate init`'s copy."""
    path = path.resolve()
    owned = [PACKAGE_DIR, gate_tests_dir(), prompts_dir(), builtin_deployments_dir()]
    owned += [builtin_baselines_dir() / name for name in SHIPPED_BASELINES]
    return any(path == root or root in path.parents for root in owned)
