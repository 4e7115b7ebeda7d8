"""SGLang's flag spellings per release (specgate/server_flags.py) against the table extracted from
the release wheels (results/2026-12-03-sglang-server-args-from-wheels/table.md): what a release
accepts, the graph bound read back the same under old and new names, the simulator taking both, and
no shipped deployment written with a spelling the release it targets refuses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specgate.diagnosis.settings import read_settings
from specgate.server_flags import (
    GRAPH_BOUND_FLAGS,
    accepts,
    graph_bound_args,
    graph_bound_from_args,
    parse_release,
    prefill_graphs_off_args,
    refused_flags,
)
from specgate.server_info import graph_bound

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "results" / "2026-12-03-sglang-server-args-from-wheels" / "table.md"


def _rows(flag: str) -> dict[str, str]:
    """release -> how it takes `flag`, from the extracted table's section for it."""
    text = TABLE.read_text(encoding="utf-8")
    section = text.split(f"### `{flag}`\n", 1)[1].split("\n### ", 1)[0]
    return dict(re.findall(r"^\| (\d[\w.]*) \| (.+) \|$", section, flags=re.M))


RELEASES = sorted(_rows("--cuda-graph-max-bs"), key=lambda v: parse_release(v) or ())
CHECKED = ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", "--cuda-graph-config",
           "--disable-piecewise-cuda-graph", "--cuda-graph-backend-prefill")  # fmt: skip


def test_the_table_covers_0_5_11_to_0_5_23():
    assert RELEASES[0] == "0.5.11" and RELEASES[-1] == "0.5.23" and len(RELEASES) >= 12


@pytest.mark.parametrize("release", RELEASES)
def test_each_release_accepts_what_its_wheel_says(release):
    r = parse_release(release)
    for flag in CHECKED:
        assert accepts(r, flag) == (_rows(flag)[release] != "ABSENT"), (release, flag)
    assert accepts(r, graph_bound_args(r, 4)[0]) and all(accepts(r, a) for a in prefill_graphs_off_args(r)[:1])


def _reported(release: str, bound: int, spelling: str) -> dict:
    """/get_server_info's graph fields as `release` reports them for `spelling` (the table's keys)."""
    if parse_release(release) < (0, 5, 14):  # type: ignore[operator]
        return {"version": release, "cuda_graph_max_bs": bound, "cuda_graph_bs": list(range(1, bound + 1))}
    resolved = {"decode": {"backend": "full", "max_bs": bound, "bs": list(range(1, bound + 1))}, "prefill": {}}
    flag_field = None if spelling == "--cuda-graph-config" else bound
    return {"version": release, "cuda_graph_max_bs_decode": flag_field, "cuda_graph_config": resolved}


@pytest.mark.parametrize("release", RELEASES)
def test_old_and_new_graph_bound_spellings_read_back_the_same_bound(release):
    r = parse_release(release)
    spellings = [f for f in (*GRAPH_BOUND_FLAGS, "--cuda-graph-config") if accepts(r, f)]
    assert spellings
    for spelling in spellings:
        args = [spelling, '{"decode":{"max_bs":4}}' if spelling == "--cuda-graph-config" else "4"]
        assert graph_bound_from_args(args) == 4, spelling
        info = _reported(release, 4, spelling)
        assert graph_bound(info) == 4 and read_settings(info).cuda_graph_max_bs == 4, spelling
        assert graph_bound({"server_args": info}) == 4  # nested, as some releases report it


@pytest.mark.parametrize("release", RELEASES)
def test_the_simulator_takes_every_spelling_its_release_takes_and_reads_the_same_bound(release):
    from specgate.sim.__main__ import _decode_graph, _graph_fields, _refused_graph_flags, _release, build_parser

    for spelling in (*GRAPH_BOUND_FLAGS, "--cuda-graph-config"):
        value = '{"decode":{"max_bs":4}}' if spelling == "--cuda-graph-config" else "4"
        argv = ["--sim-release", release, spelling, value]
        refused = _refused_graph_flags(_release(release), argv)  # main() exits 2 on these, before booting
        if spelling in GRAPH_BOUND_FLAGS[:1]:
            assert bool(refused) == (not accepts(parse_release(release), spelling)), (release, spelling)
        if refused:
            continue
        args, unknown = build_parser().parse_known_args(argv)
        assert not unknown
        on, bound = _decode_graph(args)
        assert on and bound == 4
        fields = _graph_fields(_release(release), args, on, bound)
        assert graph_bound(fields) == 4 and read_settings(fields).cuda_graph_max_bs == 4


def _target(command: tuple[str, ...]) -> tuple[int, ...] | None | str:
    """The release a command runs: /tmp/sglang-V/python is V; `{python}` the bundle's main release
    (tools/bundle.sh, its first); the simulator takes every spelling."""
    if any("specgate.sim" in c for c in command):
        return "sim"
    if command and command[0] == "{python}":
        main = re.search(r'releases=\$\{SGLANG_RELEASES:-"([^ +"]+)', (ROOT / "tools" / "bundle.sh").read_text())
        assert main
        return parse_release(main.group(1))
    return parse_release(command[0] if command else None)


def test_no_shipped_deployment_is_written_with_a_spelling_its_release_refuses():
    from specgate.deployment import load_deployment

    names = sorted(p.stem for p in (ROOT / "fixtures" / "deployments").glob("*.toml"))
    checked = 0
    for name in names:
        dep = load_deployment(name)
        for cname, config in dep.configs.items():
            target = _target(tuple(config.command or dep.launch.command))
            if target == "sim":
                continue
            assert not refused_flags(target, (*dep.launch.args, *config.args)), (name, cname, target)  # type: ignore[arg-type]
            checked += 1
    assert checked
    # The check bites: the same flags pointed at 0.5.20 are refused, each with what to write instead.
    assert refused_flags((0, 5, 20), ["--cuda-graph-max-bs", "2", "--disable-piecewise-cuda-graph"]) == [
        "--cuda-graph-max-bs (use --cuda-graph-max-bs-decode)",
        "--disable-piecewise-cuda-graph (use --cuda-graph-backend-prefill disabled)",
    ]
