"""Server lifecycle: boots, boot failures, deaths, and teardown of the whole group."""

from __future__ import annotations

import os
import signal
import time

import pytest
from helpers import merge, processes_with, sim_deployment_dict

from specgate.client import GenerateRequest
from specgate.deployment import ServerConfig, load_deployment, parse_deployment
from specgate.errors import ServerBootError, ServerDiedError
from specgate.server.local import LocalLauncher, group_pids
from specgate.server.pool import ServerPool


def deployment(tmp_path, **launch):
    data = merge(sim_deployment_dict(), {"launch": launch})
    return parse_deployment(data, tmp_path / "dep.toml")


def config(name, *args):
    return ServerConfig(name, tuple(args), {}, None, "")


def test_command_that_cannot_start_names_the_command(tmp_path):
    dep = deployment(tmp_path, command=["/nonexistent/python", "-m", "sglang.launch_server"])
    with pytest.raises(
        ServerBootError, match=r"(?s)cannot start '/nonexistent/python'.*command: /nonexistent/python -m sglang"
    ):
        LocalLauncher(dep, tmp_path).start(config("baseline"))


def test_process_that_exits_at_boot_reports_code_and_log_tail(tmp_path):
    dep = deployment(tmp_path, command=["{python}", "-c", "import sys; print('CUDA out of memory'); sys.exit(7)"])
    launcher = LocalLauncher(dep, tmp_path)
    handle = launcher.start(config("baseline"))
    with pytest.raises(ServerBootError) as err:
        launcher.wait_ready(handle, None)
    message = str(err.value)
    assert "exited with code 7" in message and "CUDA out of memory" in message and "command:" in message


def test_boot_timeout_stops_the_server_and_shows_the_log(tmp_path):
    tag = f"tag-{os.getpid()}-timeout"
    dep = deployment(tmp_path, boot_timeout_s=1.5)
    launcher = LocalLauncher(dep, tmp_path)
    handle = launcher.start(config("baseline", "--sim-fault", "never-ready", f"--x={tag}"))
    with pytest.raises(ServerBootError, match=r"(?s)boot_timeout_s = 1.5 s.*never-ready fault"):
        launcher.wait_ready(handle, None)
    assert not processes_with(tag)


def test_teardown_reaches_children_of_the_server(tmp_path):
    tag = f"tag-{os.getpid()}-children"
    # A launcher script that forks a helper (as SGLang forks its scheduler) and then serves.
    script = f"import subprocess, sys, runpy; subprocess.Popen(['sleep', '300', '{tag}'][:2]); sys.argv=['sim', *sys.argv[1:]]; runpy.run_module('specgate.sim', run_name='__main__')"
    dep = deployment(tmp_path, command=["{python}", "-c", script])
    launcher = LocalLauncher(dep, tmp_path)
    handle = launcher.start(config("baseline", f"--x={tag}"))
    launcher.wait_ready(handle, None)
    members = group_pids(handle.pid)
    assert len(members) >= 2  # the server and its helper
    launcher.stop(handle)
    assert not group_pids(handle.pid)
    assert not processes_with(tag)
    launcher.stop(handle)  # twice is harmless


def test_pool_reports_a_death_and_fails_fast_afterwards(tmp_path):
    dep = load_deployment(None)
    dep = parse_deployment(
        merge(sim_deployment_dict(), {"configs": {"baseline": {"args": ["--sim-fault", "crash-after=1"]}}}),
        tmp_path / "dep.toml",
    )
    pool = ServerPool(dep, tmp_path)
    try:
        server = pool.acquire("baseline")
        server.generate(GenerateRequest(max_new_tokens=4, text="hi"))
        with pytest.raises(
            ServerDiedError, match=r"(?s)died after serving 1 request.*exited with code 3.*crash-after=1"
        ):
            server.generate(GenerateRequest(max_new_tokens=4, text="hi"))
        with pytest.raises(ServerBootError, match="unusable in this session"):
            pool.acquire("baseline")
    finally:
        pool.close()


def test_a_server_killed_by_sigkill_is_reported_by_its_signal_and_leaves_nothing(tmp_path):
    # SIGKILL cannot be caught: the supervisor must still pass the death on, not crash on it.
    dep = deployment(tmp_path)
    pool = ServerPool(dep, tmp_path)
    try:
        server = pool.acquire("baseline")
        server.generate(GenerateRequest(max_new_tokens=4, text="hi"))
        supervisor = pool.launcher._procs[server.handle.pid]
        os.kill(server.handle.pid, signal.SIGKILL)
        assert supervisor.wait(timeout=30) == -signal.SIGKILL
        with pytest.raises(ServerDiedError, match=r"killed by signal 9 \(SIGKILL\)"):
            server.generate(GenerateRequest(max_new_tokens=4, text="hi"))
        assert "Traceback" not in server.handle.log_path.read_text()
    finally:
        pool.close()
    assert not group_pids(server.handle.pid)


def test_servers_that_cannot_coexist_run_one_at_a_time(tmp_path):
    dep = deployment(tmp_path, coexist=False)
    pool = ServerPool(dep, tmp_path)
    try:
        first = pool.acquire("baseline")
        pid = first.handle.pid
        pool.acquire("eagle3-decode")
        assert list(pool.live) == ["eagle3-decode"]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the first server still runs after the second booted")
    finally:
        pool.close()
    assert not pool.live


def test_sigterm_to_specgate_leaves_no_server(tmp_path, pytester):
    """A CI runner cancelling the job (SIGTERM) must not orphan servers."""
    tag = f"tag-{os.getpid()}-sigterm"
    script = tmp_path / "run.py"
    script.write_text(
        "import sys, time\n"
        "from pathlib import Path\n"
        "from specgate.deployment import load_deployment, ServerConfig\n"
        "from specgate.server.pool import ServerPool\n"
        "pool = ServerPool(load_deployment(None), Path(sys.argv[1]))\n"
        f"pool.launcher.start(ServerConfig('baseline', ('--x={tag}',), {{}}, None, ''))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"started"
    deadline = time.monotonic() + 10
    while not processes_with(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=15)
    deadline = time.monotonic() + 5
    while processes_with(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes_with(tag)


def test_interrupted_stop_still_leaves_the_group_to_stop_all(tmp_path, monkeypatch):
    """Ctrl-C while stop() waits for a slow shutdown: the server must not fall out of
    the launcher's table, or nothing would kill it afterwards."""
    tag = f"tag-{os.getpid()}-interrupted-stop"
    dep = deployment(tmp_path, shutdown_timeout_s=5)
    launcher = LocalLauncher(dep, tmp_path)
    handle = launcher.start(config("baseline", f"--x={tag}"))
    launcher.wait_ready(handle, None)

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalLauncher, "_wait_group_gone", staticmethod(interrupted))
    with pytest.raises(KeyboardInterrupt):
        launcher.stop(handle)
    monkeypatch.undo()
    launcher.stop_all()
    deadline = time.monotonic() + 5
    while processes_with(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes_with(tag)


def test_memory_not_released_blocks_the_next_boot(tmp_path, monkeypatch):
    import specgate.server.local as local

    dep = deployment(tmp_path)
    launcher = LocalLauncher(dep, tmp_path)
    handle = launcher.start(config("baseline"))
    launcher.wait_ready(handle, None)
    monkeypatch.setattr(local, "wait_gpu_released", lambda *a, **k: "processes [4242] still listed")
    launcher.stop(handle)
    with pytest.raises(
        ServerBootError, match=r"not booting 'eagle3-decode': GPU memory of 'baseline' was not released"
    ):
        launcher.start(config("eagle3-decode"))


def test_url_launcher_attaches_and_times_out_naming_the_field(tmp_path):
    from specgate.server.local import free_port
    from specgate.server.url import UrlLauncher

    local = LocalLauncher(deployment(tmp_path), tmp_path)
    running = local.start(config("baseline"))
    try:
        local.wait_ready(running, None)
        dep = parse_deployment(
            merge(
                sim_deployment_dict(),
                {
                    "launch": {"launcher": "url", "boot_timeout_s": 1},
                    "configs": {
                        "baseline": {"url": running.base_url},
                        "eagle3-prefill": {"url": f"http://127.0.0.1:{free_port()}"},
                        "eagle3-decode": {"url": running.base_url},
                    },
                },
            ),
            tmp_path / "url.toml",
        )
        launcher = UrlLauncher(dep)
        attached = launcher.start(dep.configs["baseline"])
        launcher.wait_ready(attached, None)
        launcher.stop(attached)  # never stops what it did not start
        assert local.alive(running)
        with pytest.raises(
            ServerBootError,
            match=r"did not answer 200 within launch.boot_timeout_s = 1 s \(configs\.eagle3-prefill\.url",
        ):
            launcher.wait_ready(launcher.start(dep.configs["eagle3-prefill"]), None)
    finally:
        local.stop(running)


def test_boot_stagger_spaces_servers_sharing_a_gpu_only(tmp_path, monkeypatch):
    """Starts on one GPU are spaced by boot_stagger_s (they race for its memory); a server on
    another GPU starts at once."""
    data = merge(sim_deployment_dict(), {"launch": {"boot_stagger_s": 0.6}})
    data["configs"]["eagle3-prefill"]["env"] = {"CUDA_VISIBLE_DEVICES": "1"}
    data["configs"]["eagle3-decode"]["env"] = {"CUDA_VISIBLE_DEVICES": "0"}
    data["configs"]["baseline"]["env"] = {"CUDA_VISIBLE_DEVICES": "0"}
    dep = parse_deployment(data, tmp_path / "dep.toml")
    pool = ServerPool(dep, tmp_path)
    starts: dict[str, float] = {}
    real_start = pool.launcher.start

    def timed_start(cfg):
        starts[cfg.name] = time.monotonic()
        return real_start(cfg)

    monkeypatch.setattr(pool.launcher, "start", timed_start)
    try:
        pool.boot(["baseline", "eagle3-prefill", "eagle3-decode"])
    finally:
        pool.close()
    assert starts["eagle3-prefill"] - starts["baseline"] < 0.3  # GPU 1: no wait for GPU 0's server
    assert starts["eagle3-decode"] - starts["baseline"] >= 0.55  # GPU 0 again: staggered


def test_fingerprint_counts_the_gpus_the_server_uses():
    from specgate.verdicts.fingerprint import _gpus_used

    assert _gpus_used({"tp_size": 2, "pp_size": 1, "dp_size": 1}) == 2
    assert _gpus_used({"server_args": {"tp_size": 4, "pp_size": 2}}) == 8
    assert _gpus_used({"tp_size": 4, "dp_size": 4, "enable_dp_attention": True}) == 4
    assert _gpus_used({"tp_size": 1, "dp_size": 2}) == 2
    assert _gpus_used({}) is None  # not said: the host's count is used


def test_orphans_of_a_run_with_another_state_folder_are_found_and_named(tmp_path, monkeypatch, capsys):
    """A run killed outright leaves a marked process (one that escaped its supervisor); a later run
    with another SPECGATE_STATE_DIR finds it through the machine's registry and says what it killed."""
    import subprocess
    import sys

    import psutil

    from specgate.server.orphans import MACHINE_DIR_ENV, STATE_DIR_ENV

    monkeypatch.setenv(MACHINE_DIR_ENV, str(tmp_path / "machine"))
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "first"))
    killed_run = (
        "import os, signal, subprocess\n"
        "from specgate.server.orphans import RunRecord\n"
        "env = RunRecord().mark(dict(os.environ))\n"
        "child = subprocess.Popen(['sleep', '300'], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,\n"
        "    start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    run = subprocess.run([sys.executable, "-c", killed_run], capture_output=True, text=True, timeout=60)
    orphan = psutil.Process(int(run.stdout.split()[0]))
    try:
        monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "second"))
        LocalLauncher(deployment(tmp_path), tmp_path / "logs")
        err = capsys.readouterr().err
        assert f"pid {orphan.pid} (sleep 300) of run" in err and "is gone (recorded in" in err, err
        orphan.wait(timeout=10)
        assert not list((tmp_path / "machine").glob("*.json")) and not list((tmp_path / "first").glob("*.json"))
    finally:
        if orphan.is_running():
            orphan.kill()


def test_a_shared_state_folder_loses_only_the_run_records_specgate_wrote(tmp_path, monkeypatch):
    """SPECGATE_STATE_DIR pointed at a folder of the user's own JSON files: a dead run's record
    (its name and its content specgate's) goes; every other file stays, whatever it holds."""
    import json

    from specgate.server.orphans import MACHINE_DIR_ENV, STATE_DIR_ENV, RunRecord, reap_orphans

    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv(STATE_DIR_ENV, str(shared))
    monkeypatch.setenv(MACHINE_DIR_ENV, str(tmp_path / "machine"))
    users = {
        "package.json": json.dumps({"name": "app", "version": "1.0"}),
        "list.json": "[1, 2, 3]",
        "broken.json": "{oops",
        # specgate's name pattern, the user's content: not a record specgate wrote
        "0123456789abcdef0123456789abcdef.json": json.dumps({"run_id": "x", "owner_pid": 1}),
    }
    for name, text in users.items():
        (shared / name).write_text(text)
    dead = RunRecord()
    dead.mark({})
    record = json.loads(dead.paths[0].read_text())
    for path in dead.paths:  # as a killed run leaves it: its specgate is gone
        path.write_text(json.dumps({**record, "owner_pid": 2**22 + 1, "owner_created": 1.0}))
    reap_orphans(wait_s=0)
    assert {p.name: p.read_text() for p in shared.iterdir()} == users
    assert not any(p.exists() for p in dead.paths)
