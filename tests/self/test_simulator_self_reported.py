"""The simulator reached without its deployment saying so (`init --launch "<its command>"`, a url
deployment pointing at a simulator server) is labelled SIMULATOR from what its servers report
(/get_server_info version "...-specgate-sim"): the terminal, report.md and report.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import tomli_w
from helpers import FAST, merge, sim_deployment_dict

from specgate.deployment import ServerConfig, parse_deployment
from specgate.provenance import provenance
from specgate.report.build import TestTally, build_report
from specgate.report.markdown import render_markdown
from specgate.resources import SOURCE_ROOT as REPO_ROOT
from specgate.server.local import LocalLauncher


def _undeclared() -> dict:
    data = merge(sim_deployment_dict(), FAST)
    data["simulator"] = False
    data["name"] = "mine"
    return data


def _report(server_infos: dict):
    dep = parse_deployment(_undeclared(), Path("mine.toml"))
    assert not dep.simulator
    return build_report(
        dep, SimpleNamespace(results={}, label=lambda s: ""), [], {}, [], None, provenance(), TestTally(0), {}, server_infos, [],
        plan={"interleaved": True, "boots": 1, "rounds": 0, "orders": []},
    )  # fmt: skip


def test_servers_that_report_the_simulator_label_the_report_though_the_deployment_does_not():
    report = _report({"baseline": {"version": "0.1.0-specgate-sim"}, "eagle3-decode": {"version": "0.1.0-specgate-sim"}})
    assert report.simulator and report.document()["simulator"] is True
    assert "**SIMULATOR run.**" in render_markdown(report)
    real = _report({"baseline": {"version": "0.5.14"}})
    assert not real.simulator and "SIMULATOR" not in render_markdown(real)


def _run_labelled_simulator(tmp_path: Path, data: dict) -> None:
    """`specgate run` of an undeclared deployment: the terminal, report.json and report.md say SIMULATOR."""
    (tmp_path / "mine.toml").write_text(tomli_w.dumps(data))
    run = subprocess.run(
        [sys.executable, "-m", "specgate.cli", "run", str(tmp_path / "mine.toml"), "--report-dir", str(tmp_path / "r"),
         "--baselines-dir", str(tmp_path / "b"), "--allow-uncompared", "--", "-k", "speed and c1"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "SPECGATE_SIM_FAULTS": ""},
    )  # fmt: skip
    shown = run.stdout[-3000:] + run.stderr[-2000:]
    # every server is named, in whatever order they became ready (url servers are waited at once)
    assert "specgate: SIMULATOR run: " in run.stdout and "baseline reports version '0.1.0-specgate-sim'" in run.stdout, shown
    assert "does not say simulator = true" in run.stdout, shown
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["simulator"] is True, shown
    assert "**SIMULATOR run.**" in (tmp_path / "r" / "report.md").read_text()
    assert "SIMULATOR run." in run.stdout  # the report the terminal prints says it too


def test_a_launch_of_the_simulators_command_is_labelled_simulator_end_to_end(tmp_path):
    """What `init --launch "python -m specgate.sim ..."` writes: the simulator's command, no simulator key."""
    _run_labelled_simulator(tmp_path, _undeclared())


def test_a_url_deployment_attached_to_simulator_servers_is_labelled_simulator_end_to_end(tmp_path):
    data = _undeclared()
    local = LocalLauncher(parse_deployment(sim_deployment_dict(), tmp_path / "sim.toml"), tmp_path)
    try:
        for name, config in data["configs"].items():
            handle = local.start(ServerConfig(name, tuple(config.get("args", ())), {}, None, ""))
            local.wait_ready(handle, None)
            config["url"] = handle.base_url
        data["launch"] = {"launcher": "url", "boot_timeout_s": 30}
        _run_labelled_simulator(tmp_path, data)
    finally:
        local.stop_all()
