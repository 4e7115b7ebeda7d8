"""Nothing specgate writes into a report folder is written through a link: a symbolic or hard
link planted at a file's name (a server log, report.md, report.png, benchmark.json) is replaced,
and the user's file it points to keeps its content."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from helpers import merge, sim_deployment_dict

from specgate.atomic import open_own, write_bytes_atomic
from specgate.deployment import ServerConfig, parse_deployment
from specgate.errors import ServerBootError
from specgate.report.folder import claim
from specgate.secrets import copy_masked, redact_file, write_masked
from specgate.server.local import LocalLauncher

LINKS = ["symlink", "hardlink"]


def _plant(link: str, at: Path, precious: Path) -> None:
    at.parent.mkdir(parents=True, exist_ok=True)
    if link == "symlink":
        at.symlink_to(precious)
    else:
        os.link(precious, at)


@pytest.fixture
def precious(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("the user's")
    return path


@pytest.mark.parametrize("append", [False, True])
@pytest.mark.parametrize("link", LINKS)
def test_open_own_replaces_a_link_and_keeps_its_file(tmp_path, precious, link, append):
    at = tmp_path / "r" / "logs" / "x.log"
    _plant(link, at, precious)
    with open_own(at, append=append) as f:
        f.write(b"server log")
    assert precious.read_text() == "the user's"
    assert not at.is_symlink() and at.stat().st_nlink == 1 and at.read_bytes() == b"server log"


def test_open_own_refuses_a_folder_in_the_way(tmp_path):
    (tmp_path / "x.log").mkdir()
    with pytest.raises(IsADirectoryError, match="x.log"):
        open_own(tmp_path / "x.log")


@pytest.mark.parametrize("link", LINKS)
def test_every_writer_of_a_report_folder_file_leaves_a_linked_file_as_it_was(tmp_path, precious, link):
    folder = tmp_path / "r"
    writers = {
        "report.md": lambda p: write_masked(p, "# report"),
        "report.png": lambda p: write_bytes_atomic(p, b"png"),
        "logs/a.log": lambda p: copy_masked(io.BytesIO(b"a line\n"), p, None),
        "logs/b.log": lambda p: redact_file(p, "sk-secret-key-123456"),
    }
    for name, write in writers.items():
        _plant(link, folder / name, precious)
        write(folder / name)
        assert precious.read_text() == "the user's", name


@pytest.mark.parametrize("link", LINKS)
def test_a_claim_removes_links_at_the_names_specgate_writes(tmp_path, precious, link):
    """benchmark.json is opened by pytest-benchmark itself: the claim removes a link there first."""
    folder = tmp_path / "r"
    claim(folder, "--report-dir").release()
    (folder / "benchmark.json").unlink(missing_ok=True)
    _plant(link, folder / "benchmark.json", precious)
    _plant(link, folder / "logs" / "new-config.log", precious)
    claim(folder, "--report-dir").release()
    assert not (folder / "benchmark.json").exists() and not (folder / "logs" / "new-config.log").exists()
    assert precious.read_text() == "the user's"


@pytest.mark.parametrize("link", LINKS)
def test_a_server_log_never_replaces_the_file_a_planted_link_points_to(tmp_path, precious, link):
    """The issue's case: `logs/<config>.log` a link to the user's file; the server's log goes
    into a file of its own at that name."""
    command = ["{python}", "-c", "print('booting'); raise SystemExit(3)"]
    dep = parse_deployment(merge(sim_deployment_dict(), {"launch": {"command": command}}), tmp_path / "dep.toml")
    logs = tmp_path / "r" / "logs"
    _plant(link, logs / "fresh.log", precious)
    launcher = LocalLauncher(dep, logs)
    handle = launcher.start(ServerConfig("fresh", (), {}, None, ""))
    with pytest.raises(ServerBootError, match="exited with code 3"):
        launcher.wait_ready(handle, None)
    launcher.stop(handle)
    assert precious.read_text() == "the user's"
    assert "booting" in (logs / "fresh.log").read_text()


def test_a_folder_at_a_servers_log_name_fails_its_boot_naming_the_log(tmp_path):
    dep = parse_deployment(sim_deployment_dict(), tmp_path / "dep.toml")
    (tmp_path / "logs" / "fresh.log").mkdir(parents=True)
    with pytest.raises(ServerBootError, match=f"config 'fresh': cannot write its log {tmp_path / 'logs' / 'fresh.log'}: a folder"):
        LocalLauncher(dep, tmp_path / "logs").start(ServerConfig("fresh", (), {}, None, ""))
