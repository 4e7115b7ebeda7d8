"""The layering ARCHITECTURE.md promises holds in the code: no module imports from a layer below
its own (deployment → requests → server → measurements → verdicts → diagnosis → report → entry
points). The table is read from ARCHITECTURE.md itself, so the document cannot drift from the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specgate"


def layers() -> dict[str, int]:
    """Module or package name → its layer number, from ARCHITECTURE.md's table."""
    out: dict[str, int] = {}
    for line in (ROOT / "ARCHITECTURE.md").read_text().splitlines():
        row = re.match(r"\|\s*(\d+) [^|]*\|([^|]*)\|", line)
        if row:
            for name in row.group(2).split(","):
                out[name.strip()] = int(row.group(1))
    return out


def unit_of(module: str) -> str:
    """`specgate.verdicts.judge` → `verdicts`; `specgate.cli` → `cli`; `specgate` → `specgate`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "specgate"


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imports() -> list[tuple[str, str, str]]:
    """(importing file, importing unit, imported unit) for every import of specgate inside specgate/."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT)
        module = module_of(path)
        for node in ast.walk(ast.parse(path.read_text(), str(rel))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            out.extend(
                (str(rel), unit_of(module), unit_of(t)) for t in targets if t == "specgate" or t.startswith("specgate.")
            )
    return out


def test_every_module_has_a_layer():
    table = layers()
    units = {unit_of(module_of(p)) for p in PACKAGE.rglob("*.py")}
    assert units - set(table) == set(), "add these to ARCHITECTURE.md's layer table"
    assert set(table) - units == set(), "ARCHITECTURE.md names modules that do not exist"


def test_no_module_imports_from_a_lower_layer():
    table = layers()
    upward = [
        f"{where}: {unit} (layer {table[unit]}) imports {target} (layer {table[target]})"
        for where, unit, target in imports()
        if unit != target and table[target] > table[unit]
    ]
    assert upward == []


def test_the_check_would_see_an_upward_import():
    """The check above is not vacuous: the imports it reads include the ones it must judge."""
    found = {(unit, target) for _, unit, target in imports()}
    assert ("verdicts", "measure") in found and ("report", "verdicts") in found
    table = layers()
    assert table["report"] > table["verdicts"] > table["deployment"] and table["sim"] == 0
