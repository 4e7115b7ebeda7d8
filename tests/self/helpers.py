"""Helpers for the self-tests: deployment variants and leftover-process checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from specgate.resources import SOURCE_ROOT as REPO_ROOT
from specgate.resources import builtin_deployments_dir

GATE_TESTS = REPO_ROOT / "tests" / "gate"

# Small enough that one simulated gate run takes seconds on a 2-core CI machine,
# large enough that every gate still has real samples to decide on.
FAST = {
    "workload": {"max_new_tokens": 40, "repeats": 6, "max_repeats": 18, "prompt_sets": ["chat", "code", "math"]},
    "equivalence": {"examples": 10, "max_new_tokens": 32},
}


def default_sigint() -> None:
    """For a child that the test interrupts with SIGINT: a suite started in the background by a
    non-interactive shell inherits SIGINT *ignored*, and Python then never raises KeyboardInterrupt.
    The test is about what specgate does when the signal arrives, not how its parent was started."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # survives exec; Python then installs its own handler


def sim_deployment_dict() -> dict[str, Any]:
    return tomllib.loads((builtin_deployments_dir() / "sim.toml").read_text())


def light_kimi_twin(folder: Path) -> Path:
    """The shipped Kimi twin as it is, measured on fewer requests (the CI machine's time: its 12
    pinned requests per config at ~11 ms a token take half a run; 6 still decide both beats gates,
    prefill mode near 0.8x and decode mode near 1.2x). Written under the shipped file's name,
    so the deployment keeps its name and its stored baseline."""
    name = "kimi-k2.5-rtxpro6000-tp8-sim.toml"
    twin = tomllib.loads((builtin_deployments_dir() / name).read_text())
    twin["workload"].update(max_repeats=twin["workload"]["repeats"])
    twin["equivalence"]["examples"] = 2
    # Its sampling check runs in turns at ~11 ms a token: a minute of the CI machine for what the
    # tests that use this twin do not judge (tests/self/test_sampling_in_turns.py sets its own).
    twin["sampling"] = {"enabled": False}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(tomli_w.dumps(twin))
    return folder / name


def merge(base: dict, overrides: dict) -> dict:
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def processes_with(tag: str) -> list[str]:
    """Command lines of live processes whose arguments or environment contain `tag`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().decode(errors="replace")
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().decode(errors="replace").rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        if tag in cmdline or tag in environ:
            found.append(f"{pid}: {cmdline}")
    return found


class SimDeployment:
    """A variant of sim.toml in a temp dir. Its runs carry a tag in the environment
    (so their servers can be found afterwards) and may inject simulator faults the
    way a code regression would arrive: from outside the deployment file."""

    def __init__(self, folder: Path, overrides: dict, fast: bool = True) -> None:
        self.tag = f"specgate-test-{uuid.uuid4().hex[:10]}"
        data = merge(sim_deployment_dict(), FAST) if fast else sim_deployment_dict()
        self.data = merge(data, overrides)
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "deployment.toml"
        self.path.write_text(tomli_w.dumps(self.data))
        self.report_dir = folder / "report"
        self.baselines_dir = folder / "baselines"

    def args(self, *extra: str, tests: Path | None = None) -> list[str]:
        """pytest's arguments for a run of the gate suite (or of `tests`, a user's own test files)."""
        # Without a stored baseline the regression gates cannot compare, and fail closed; a test
        # about something else allows that, so it sees only the failures it provokes (the
        # fail-closed behaviour has its own tests, which pass "--strict-uncompared").
        strict = "--strict-uncompared" in extra
        extra = tuple(e for e in extra if e != "--strict-uncompared")
        allow = [] if strict or self.holds_stored_documents() else ["--specgate-allow-uncompared"]
        return [
            str(tests or GATE_TESTS),
            "-p",
            "specgate.plugin",
            f"--specgate-deployment={self.path}",
            f"--specgate-report-dir={self.report_dir}",
            f"--specgate-baselines-dir={self.baselines_dir}",
            "-q",
            # The cases drawn vary per commit in real runs; a self-test must not (CI's commit would
            # decide which faults its cases happen to reach).
            "--specgate-case-seed=0",
            *allow,
            *extra,
        ]

    def holds_stored_documents(self) -> bool:
        """Its baselines folder holds a stored document (what an earlier run's results history,
        which every completed run appends to, is not)."""
        return self.baselines_dir.is_dir() and any(
            p.is_file() and "results" not in p.relative_to(self.baselines_dir).parts[:-1]
            for p in self.baselines_dir.rglob("*")
        )

    def run(
        self,
        pytester: Any | None,
        *extra: str,
        faults: str = "",
        env: dict[str, str] | None = None,
        tests: Path | None = None,
    ) -> pytest.RunResult:
        """Run the gate suite in a subprocess, as a CI job would (through pytester
        where the caller has one; module-scoped fixtures have none)."""
        env = {"SPECGATE_TEST_TAG": self.tag, "SPECGATE_SIM_FAULTS": faults, **(env or {})}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            if pytester is not None:
                return pytester.runpytest_subprocess(*self.args(*extra, tests=tests), timeout=240)
            started = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", *self.args(*extra, tests=tests)],
                capture_output=True,
                text=True,
                timeout=240,
            )
            return pytest.RunResult(
                proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(), time.monotonic() - started
            )
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def report(self) -> dict:
        return json.loads((self.report_dir / "report.json").read_text())

    def leftovers(self) -> list[str]:
        return processes_with(self.tag)


def recorded_baselines(folder: Path, overrides: dict) -> Path:
    """The baselines folder of a baseline update of the simulator (with `overrides`), for tests
    to copy into their own deployments (with_baselines)."""
    d = SimDeployment(folder, overrides)
    result = d.run(None, "--specgate-update-baselines")
    assert result.ret == 0, "\n".join(result.outlines[-60:])
    assert not d.leftovers()
    return d.baselines_dir


def with_baselines(d: SimDeployment, source: Path) -> SimDeployment:
    shutil.copytree(source, d.baselines_dir)
    return d


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded stub HTTP server on a free port, its url yielded; `server.stop` (an Event) tells
    handlers that loop forever to end, then the server is shut down."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.stop = threading.Event()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stop.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
