"""launch.cpu_affinity = "split": each server booted side by side on its own fixed CPU slice."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import sim_deployment_dict

from specgate.cli.check import describe
from specgate.deployment import DeploymentError, parse_deployment
from specgate.server import affinity
from specgate.server.supervise import CPUS_ENV


def test_slices_are_disjoint_equal_and_in_a_fixed_order():
    got = affinity.split(["a", "b", "c"], list(range(16)))
    assert got == {"a": [0, 1, 2, 3, 4], "b": [5, 6, 7, 8, 9], "c": [10, 11, 12, 13, 14]}
    assert affinity.split(["a", "b", "c"], [0, 1]) == {}  # too few CPUs: nobody pinned
    assert affinity.cpu_list([5, 0, 1, 2, 8, 9]) == "0-2,5,8-9"
    assert affinity.parse_cpu_list("0-2,5,8-9") == {0, 1, 2, 5, 8, 9}
    with pytest.raises(ValueError):
        affinity.parse_cpu_list("3-1")


def _dep(tmp_path, **launch):
    data = sim_deployment_dict()
    data["launch"].update(launch)
    return parse_deployment(data, tmp_path / "d.toml")


def test_every_config_and_replicate_gets_a_slice_and_check_says_which(tmp_path, monkeypatch):
    dep = _dep(tmp_path, cpu_affinity="split", boots=2)
    servers = affinity.side_by_side(dep)
    assert servers == [s for c in dep.configs for s in (c, f"{c}@2")]
    monkeypatch.setattr(affinity, "available_cpus", lambda: list(range(12)))
    text = describe(dep)
    assert "CPU affinity split: " in text and f"{servers[0]} on 0-1" in text and f"{servers[-1]} on 10-11" in text
    monkeypatch.setattr(affinity, "available_cpus", lambda: [0])
    assert 'WARNING: launch.cpu_affinity = "split"' in describe(dep)


def test_split_is_for_servers_specgate_starts(tmp_path):
    with pytest.raises(DeploymentError, match=r"launch\.cpu_affinity.*local"):
        data = sim_deployment_dict()
        data["launch"].update(launcher="url", cpu_affinity="split")
        for name, cfg in data["configs"].items():
            cfg["url"] = f"http://127.0.0.1:1/{name}"
        parse_deployment(data, tmp_path / "d.toml")
    with pytest.raises(DeploymentError, match=r"launch\.cpu_affinity.*none, split"):
        _dep(tmp_path, cpu_affinity="numa")


def test_the_supervisor_pins_the_server_before_it_starts():
    from specgate.server.local import SUPERVISOR

    cpu = sorted(os.sched_getaffinity(0))[-1]
    read, write = os.pipe()
    probe = "import os; print(sorted(os.sched_getaffinity(0)), os.environ.get('SPECGATE_CPUS'))"
    proc = subprocess.Popen(
        [sys.executable, "-P", str(SUPERVISOR), "--status-fd", str(write), "--", sys.executable, "-c", probe],
        env={**os.environ, CPUS_ENV: str(cpu)},
        pass_fds=(write,),
        stdin=subprocess.PIPE,  # the supervisor's lifeline: held open until the server is done
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    try:
        printed = proc.stdout.read()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
        assert os.read(read, 100).startswith(b"ok ")
    finally:
        proc.stdin.close()
        os.close(read)
    assert printed.strip() == f"[{cpu}] None"  # pinned, and the variable not passed on
