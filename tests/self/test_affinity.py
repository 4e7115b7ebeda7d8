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


def fake_sysfs(root, cores, name="thread_siblings_list"):
    """A sysfs cpu tree in which each tuple of `cores` is one physical core's logical CPUs."""
    for core in cores:
        for cpu in core:
            topology = root / f"cpu{cpu}" / "topology"
            topology.mkdir(parents=True)
            (topology / name).write_text(affinity.cpu_list(list(core)) + "\n")
    return root


def test_slices_are_disjoint_equal_and_in_a_fixed_order(tmp_path):
    unreadable = tmp_path / "no-sysfs"
    got = affinity.split(["a", "b", "c"], list(range(16)), unreadable)
    assert got == {"a": [0, 1, 2, 3, 4], "b": [5, 6, 7, 8, 9], "c": [10, 11, 12, 13, 14]}
    assert affinity.split(["a", "b", "c"], [0, 1], unreadable) == {}  # too few CPUs: nobody pinned
    assert affinity.cpu_list([5, 0, 1, 2, 8, 9]) == "0-2,5,8-9"
    assert affinity.parse_cpu_list("0-2,5,8-9") == {0, 1, 2, 5, 8, 9}
    with pytest.raises(ValueError):
        affinity.parse_cpu_list("3-1")


def test_slices_keep_each_physical_cores_threads_with_one_server(tmp_path):
    # Linux numbers the second threads after the first ones: core k is CPUs k and k+8.
    sysfs = fake_sysfs(tmp_path / "cpu", [(k, k + 8) for k in range(8)])
    placed = affinity.placement(["a", "b", "c"], list(range(16)), sysfs)
    assert placed.whole_cores and placed.why_threads == ""
    assert placed.slices == {"a": [0, 1, 8, 9], "b": [2, 3, 10, 11], "c": [4, 5, 12, 13]}
    assert placed.cores == {"a": 2, "b": 2, "c": 2}
    owner = {cpu: name for name, cpus in placed.slices.items() for cpu in cpus}
    for k in range(8):  # no core's two threads with two servers
        assert owner.get(k) == owner.get(k + 8)
    # core_cpus_list (the newer name) is read as well; a core this process holds one thread of is one core
    sysfs = fake_sysfs(tmp_path / "cpu-new", [(0, 4), (1, 5), (2, 6), (3, 7)], name="core_cpus_list")
    assert affinity.split(["a", "b"], [0, 1, 2, 3, 5, 7], sysfs) == {"a": [0, 1, 5], "b": [2, 3, 7]}


def test_where_the_topology_cannot_be_read_or_holds_too_few_cores_slices_are_logical_cpus(tmp_path):
    unreadable = affinity.placement(["a", "b"], list(range(4)), tmp_path / "absent")
    assert not unreadable.whole_cores and unreadable.slices == {"a": [0, 1], "b": [2, 3]}
    assert "cannot be read from" in unreadable.why_threads
    sysfs = fake_sysfs(tmp_path / "cpu", [(0, 2), (1, 3)])
    few = affinity.placement(["a", "b", "c"], [0, 1, 2, 3], sysfs)
    assert not few.whole_cores and few.why_threads == "2 physical core(s) for 3 servers"
    assert few.slices == {"a": [0], "b": [1], "c": [2]}
    contradicting = fake_sysfs(tmp_path / "bad", [(0, 1), (2,)])
    (contradicting / "cpu1" / "topology" / "thread_siblings_list").write_text("1-2\n")
    assert affinity.physical_cores([0, 1, 2], contradicting) is None


def _dep(tmp_path, **launch):
    data = sim_deployment_dict()
    data["launch"].update(launch)
    return parse_deployment(data, tmp_path / "d.toml")


def test_every_config_and_replicate_gets_a_slice_and_check_says_which(tmp_path, monkeypatch):
    dep = _dep(tmp_path, cpu_affinity="split", boots=2)
    servers = affinity.side_by_side(dep)
    assert servers == [s for c in dep.configs for s in (c, f"{c}@2")]
    monkeypatch.setattr(affinity, "available_cpus", lambda: list(range(12)))
    monkeypatch.setattr(affinity, "SYSFS_CPU", tmp_path / "no-sysfs")
    text = describe(dep)
    assert "CPU affinity split by logical CPU, not whole cores (which CPUs share a physical core cannot be read" in text
    assert f"{servers[0]} on 0-1 (2 threads)" in text and f"{servers[-1]} on 10-11 (2 threads)" in text
    monkeypatch.setattr(affinity, "SYSFS_CPU", fake_sysfs(tmp_path / "cpu", [(k, k + 6) for k in range(6)]))
    text = describe(dep)
    assert "CPU affinity split by whole physical cores" in text
    from specgate.calibrate.analyse import runner_setup

    assert "own fixed CPU slice, by whole physical cores" in runner_setup(dep)
    assert f"{servers[0]} on 0,6 (1 core, 2 threads)" in text and f"{servers[-1]} on 5,11 (1 core, 2 threads)" in text
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
