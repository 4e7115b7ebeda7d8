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


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The modules one AST node imports: `import a.b`, `from a import b` (b may be a module),
    relative imports resolved against `module`, and importlib.import_module("literal")."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            base = ".".join(package[: len(package) - (node.level - 1)])
            source = f"{base}.{node.module}" if node.module else base
        else:
            source = node.module or ""
        return [source, *(f"{source}.{a.name}" for a in node.names)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, (ast.Attribute, ast.Name))
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


def imports() -> list[tuple[str, str, str]]:
    """(importing file, importing unit, imported unit) for every import of specgate inside specgate/.
    `from specgate import report` imports `report`, not the package: each imported name that is a
    module of specgate counts as one (a name that is not, as the module it comes from)."""
    units = {unit_of(module_of(p)) for p in PACKAGE.rglob("*.py")}
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT)
        module = module_of(path)
        for node in ast.walk(ast.parse(path.read_text(), str(rel))):
            for target in _targets(node, module, path.name == "__init__.py"):
                if target == "specgate" or target.startswith("specgate."):
                    unit = unit_of(target)
                    out.append((str(rel), unit_of(module), unit if unit in units else "specgate"))
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


# What the simulator may read besides itself: what SGLang's own parser takes per release (data
# about SGLang, not the gate), which itself imports nothing of specgate.
SIM_MAY_READ = {"sglang_cli"}


def test_the_simulator_stands_alone():
    """SIMULATOR code imports nothing of the gate: it stands in for SGLang, which knows no specgate."""
    assert [
        (where, target) for where, unit, target in imports() if unit == "sim" and target not in {"sim", *SIM_MAY_READ}
    ] == []
    assert [(where, target) for where, unit, target in imports() if unit in SIM_MAY_READ and target != unit] == []


def test_the_check_would_see_an_upward_import():
    """The check above is not vacuous: the imports it reads include the ones it must judge."""
    found = {(unit, target) for _, unit, target in imports()}
    assert ("verdicts", "measure") in found and ("report", "verdicts") in found
    # The forms an upward import could hide in: `from specgate import x`, relative, importlib.
    tree = ast.parse(
        "from specgate import report\nfrom ..verdicts import judge\n"
        "def f():\n    importlib.import_module('specgate.diagnosis')\n"
    )
    seen = [t for node in ast.walk(tree) for t in _targets(node, "specgate.measure.x", False)]
    assert {"specgate.report", "specgate.verdicts.judge", "specgate.diagnosis"} <= set(seen)
    table = layers()
    assert table["report"] > table["verdicts"] > table["deployment"] and table["sim"] == 0


LAB = ROOT / "lab"


def _imported(path: Path) -> set[str]:
    """Every module name `path` imports (absolute forms; the lab and the product use no relative ones)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        out.update(_targets(node, "", False))
    return out


def test_the_product_never_imports_the_lab():
    """The lab (lab/specgate_lab: drafters, model assets) builds on the product, never the reverse."""
    upward = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in _imported(path)
        if name.split(".")[0] == "specgate_lab"
    ]
    assert upward == []
    lab_imports = {name for path in LAB.rglob("*.py") for name in _imported(path)}
    assert "specgate.errors" in lab_imports, "the lab no longer imports the product: is this check reading it?"


def test_the_wheel_holds_no_lab_code():
    """pyproject's package list (what the wheel ships) names every package under specgate/ and
    nothing that trains drafters: no module of its folders imports SpecForge, and none is the lab's."""
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {
        name: ROOT / setuptools.get("package-dir", {}).get(name, name.replace(".", "/"))
        for name in setuptools["packages"]
    }
    on_disk = {module_of(p.parent) for p in PACKAGE.rglob("__init__.py")}
    assert on_disk <= set(folders), "a package under specgate/ is missing from pyproject's [tool.setuptools] packages"
    training = [
        str(path.relative_to(ROOT))
        for folder in folders.values()
        for path in folder.glob("*.py")
        if any(name.split(".")[0] in ("specforge", "specgate_lab") for name in _imported(path))
    ]
    assert training == []
    assert not any(folder.is_relative_to(LAB) for folder in folders.values())


def test_the_judge_is_in_parts():
    """One module per gate kind over a shared sampler and store of stored evidence (ARCHITECTURE.md,
    layer 5): a gate kind is found, and added, in its own module, not in one class of a thousand lines."""
    from specgate.verdicts.judge import Judge

    where = {
        "beats": "beats_gate",
        "accept_floor": "accept_gate",
        "regression": "regression_gate",
        "fingerprint": "evidence",
        "stored_for_comparison": "evidence",
        "fidelity": "sampler",
    }
    assert {name: getattr(Judge, name).__module__.rsplit(".", 1)[-1] for name in where} == where
    parts = ["judge", "sampler", "evidence", "gate_base", "beats_gate", "accept_gate", "regression_gate"]
    sizes = {part: len((PACKAGE / "verdicts" / f"{part}.py").read_text().splitlines()) for part in parts}
    assert max(sizes.values()) < 600, sizes


def test_every_gate_kind_is_one_module_named_once():
    """A gate kind is one module of `verdicts` defining KIND, named in gate_kinds.KIND_MODULES: the
    one place a lower layer reaches up, by name. Every module defining a kind is listed (none is
    silently left out of the run), and every name listed is a layer-5 module."""
    from specgate.gate_kinds import KIND_MODULES, GateKind, kinds

    assert layers()["verdicts"] == 5
    assert all((PACKAGE / "verdicts" / f"{name}.py").is_file() for name in KIND_MODULES)
    defining = sorted(
        path.stem
        for path in (PACKAGE / "verdicts").glob("*.py")
        if re.search(r"^KIND = ", path.read_text(), re.MULTILINE)
    )
    assert defining == sorted(KIND_MODULES)
    assert all(isinstance(k, GateKind) for k in kinds())
    # Nothing but gate_kinds imports a module by a computed name (the layer check reads literals only).
    computed = [
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*.py")
        if re.search(r"import_module\((?![\"'])", path.read_text()) and path.name != "gate_kinds.py"
    ]
    assert computed == [], "a computed import escapes the layer check"
