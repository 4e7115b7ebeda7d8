"""The README and docs/ say what the code does: the commands CI runs, the CLI's exit codes, the
generated reference pages, and links that lead somewhere. In-process, no server."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"README.md: expected a section '## {title}'"
    return match.group(1)


def test_the_readme_is_short_and_gives_the_two_commands_ci_runs():
    text = README.read_text()
    assert len(text.splitlines()) <= 250, "README.md: expected at most 250 lines; move the depth to docs/"
    fresh = _section(text, "On a fresh machine")
    ci = (ROOT / ".ci" / "run").read_text()
    for command in ("specgate run", "python3 -m pytest -n 2"):
        assert re.search(rf"^{re.escape(command)}\s", fresh, re.M), f"README.md: expected the command {command!r}"
        assert re.search(rf"^{re.escape(command)}$", ci, re.M), f".ci/run: expected the README's command {command!r}"


def test_the_exit_codes_section_the_cli_points_to_lists_the_cli_s_codes():
    from specgate.exits import Exit

    table = _section(README.read_text(), "Exit codes")
    rows = dict(re.findall(r"^\| (\d) \| ([A-Za-z ]+?) \|", table, re.M))
    expected = {
        Exit.PASS: "PASS",
        Exit.FAIL: "FAIL",
        Exit.BAD_INPUT: "bad input",
        Exit.INCONCLUSIVE: "INCONCLUSIVE",
        Exit.PARTIAL: "PARTIAL",
        Exit.INTERRUPTED: "INTERRUPTED",
        Exit.ERROR: "ERROR",
    }
    assert {int(code): word for code, word in rows.items()} == expected


def test_the_ci_page_lists_the_exit_codes_of_the_one_table():
    """docs/ci.md's "Exit codes" lists every code of specgate.exits, with its verdict."""
    from specgate.exits import Exit

    page = (ROOT / "docs" / "ci.md").read_text()
    table = re.search(r"^## Exit codes\n(.*?)(?=^## |\Z)", page, re.S | re.M)
    assert table, "docs/ci.md: expected a section '## Exit codes'"
    rows = {int(code): word for code, word in re.findall(r"^\| (\d) \| ([A-Za-z ]+?) \|", table.group(1), re.M)}
    assert rows == {code.value: code.name.replace("_", " ").lower() if code == Exit.BAD_INPUT else code.name for code in Exit}


def test_the_generated_reference_pages_are_current():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "tools" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for path, text in tool.expected().items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is stale: run python3 tools/docs_reference.py"


def test_every_relative_link_in_the_readme_and_docs_leads_to_a_file():
    broken = []
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_readmes_stored_simulator_figures_are_the_stored_files():
    import json

    line = next(x for x in README.read_text().splitlines() if x.startswith("The stored simulator baseline has them at"))
    quoted = [float(v) for v in re.findall(r"(\d+\.\d+)", line)]
    (stored,) = (ROOT / "baselines" / "sim").glob("*.json")
    configs = json.loads(stored.read_text())["configs"]
    ratios = [configs[c]["concurrency"]["1"]["ratio_to_reference"] for c in ("eagle3-prefill", "eagle3-decode")]
    expected = [r["estimate"] for r in ratios] + [v for r in ratios for v in (r["low"], r["high"])]
    assert quoted == [round(v, 2) for v in expected], (quoted, expected)


def test_the_tutorials_init_writes_the_files_init_writes(tmp_path):
    """docs/tutorial.md quotes `specgate init`'s output: the files it names are the ones written, in order."""
    from specgate.starter import write_project

    text = (ROOT / "docs" / "tutorial.md").read_text()
    block = re.search(r"`specgate init` writes (\w+) files.*?```text\n(.*?)```", text, re.S)
    assert block, "docs/tutorial.md: expected the files `specgate init` writes, in a text block"
    quoted = [line.removeprefix("wrote ") for line in block.group(2).splitlines()]
    written = [str(p.relative_to(tmp_path)) for p in write_project(tmp_path).files]
    assert quoted == written
    numbers = {"four": 4, "five": 5, "six": 6, "seven": 7}
    assert numbers.get(block.group(1)) == len(written), block.group(1)
