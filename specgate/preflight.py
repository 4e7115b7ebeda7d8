"""What would keep a deployment's servers from booting on this host, found without booting one.

`specgate check` prints these as warnings (a file may be meant for another host), and the pytest
plugin, where a plain `pytest` collects the gate because specgate.toml says `gate = true`, skips
the gate with the first certain one as its reason instead of failing every gate test on a host
that cannot run it (a laptop without SGLang). `specgate run` and an explicit
`--specgate-deployment` never skip: there a server that cannot boot fails the run, loudly.

The launch command's Python is found as a person reads the command: `{python}` (this
interpreter), `python`, `python3.11`, `/venv/bin/python`, after `env [NAME=VALUE ...]`, or
inside `bash -c "... && python -m sglang.launch_server ..."`; that Python is asked to import the
module it would run (`-m sglang.launch_server`: sglang). The simulator (`-m specgate.sim`) is
never asked: it is this package.

Credentials read from the environment (`launch.api_key_env`, a url's `${NAME}` password) are
checked here too (`credential_problems`): a run refuses a deployment whose credential is missing
before it boots anything, as bad input, and `specgate check` warns of the same.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from specgate import project
from specgate.deployment import Deployment, expand_placeholders
from specgate.errors import SpecgateError
from specgate.secrets import api_key, expand_url

IMPORT_TIMEOUT_S = 20.0  # importing SGLang's top package takes seconds on a loaded host, never this long
CONNECT_TIMEOUT_S = 2.0
_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)*)?(\.exe)?")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
_ENV_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
# Shell words after which the PATH (or the interpreter) a later `python` names is not ours to know.
_CHANGES_PYTHON = frozenset({"source", ".", "conda", "mamba", "module", "export", "pyenv", "uv", "poetry", "pipenv"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&"})
_OWN_MODULE = "specgate"  # the simulator and anything else of this package: importable wherever specgate runs


@dataclass(frozen=True)
class Problem:
    text: str
    blocks: bool  # certain: no server of the deployment boots from this host


@dataclass(frozen=True)
class Program:
    """What a launch command runs, as far as it can be read: its first word (the executable),
    and where that word or a later one is a Python interpreter, that Python and its `-m` module."""

    executable: str
    python: str | None = None
    module: str | None = None


def _strip_env(words: list[str]) -> list[str]:
    """`env [-i] [-u NAME] [NAME=VALUE ...] cmd` and bare `NAME=VALUE cmd` (in a shell): cmd."""
    words = list(words)
    if words and Path(words[0]).name == "env":
        words.pop(0)
        while words and words[0].startswith("-"):
            flag = words.pop(0)
            if flag == "--":
                break
            if flag in ("-u", "--unset", "-C", "--chdir") and words:
                words.pop(0)
    while words and _ENV_WORD.fullmatch(words[0]):
        words.pop(0)
    if words and words[0] == "exec":
        words.pop(0)
    return words


def _module_after(words: list[str]) -> str | None:
    """The `-m MODULE` of a Python command line's options (None: a script, `-c`, or nothing)."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-m":
            return words[i + 1] if i + 1 < len(words) else None
        if word.startswith("-m") and len(word) > 2:
            return word[2:]
        if word in ("-X", "-W", "-Q"):
            i += 2
            continue
        if not word.startswith("-") or word in ("-c", "-"):
            return None
        i += 1
    return None


def _shell_script(words: list[str]) -> str | None:
    """The script of `bash [-options] -c SCRIPT`, if that is what `words` is."""
    if not words or Path(words[0]).name not in _SHELLS:
        return None
    for i, word in enumerate(words[1:], start=1):
        if word.startswith("-") and "c" in word[1:] and not word.startswith("--"):
            return words[i + 1] if i + 1 < len(words) else None
        if not word.startswith("-"):
            return None
    return None


def read_program(command: Sequence[str], values: dict[str, str]) -> Program | None:
    """What `command` (placeholders filled from `values`) runs; None where it cannot be read."""
    words = _strip_env([expand_placeholders(w, values) for w in command])
    if not words:
        return None
    if _PYTHON_NAME.fullmatch(Path(words[0]).name) or words[0] == values.get("python"):
        return Program(words[0], words[0], _module_after(words[1:]))
    script = _shell_script(words)
    if script is None:
        return Program(words[0])
    try:
        tokens = shlex.split(script)
    except ValueError:
        return Program(words[0])
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(token)
    found: Program | None = None
    moved = False  # a `cd` before: a relative path after it is not relative to the project
    for segment in (s for s in segments if s):
        inner = _strip_env(segment)
        if not inner:
            continue
        if inner[0] in _CHANGES_PYTHON:
            return Program(words[0])  # a sourced venv or conda env: which python runs is not ours to know
        moved = moved or inner[0] in ("cd", "pushd")
        if _PYTHON_NAME.fullmatch(Path(inner[0]).name):
            if moved and "/" in inner[0] and not Path(inner[0]).is_absolute():
                return Program(words[0])
            found = Program(words[0], inner[0], _module_after(inner[1:]))
            if found.module:
                break
    return found or Program(words[0])


def _resolve(word: str, cwd: Path) -> str | None:
    """The executable a word names, as the launcher would start it (in `cwd`), or None."""
    if "/" in word or os.sep in word:
        path = Path(word) if Path(word).is_absolute() else cwd / word
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(word)


def _cannot_import(python: str, module: str, env: dict[str, str], cwd: Path) -> tuple[bool | None, str]:
    """(True, why) where `python` cannot import `module`'s top package, (False, "") where it can,
    (None, why) where it could not be told."""
    top = module.split(".")[0]
    same_paths = all(env.get(k) == os.environ.get(k) for k in {*env, *os.environ} if k.startswith("PYTHON"))
    if python == sys.executable and same_paths:
        return (importlib.util.find_spec(top) is None, "")  # this interpreter, as it is: no process needed
    try:
        done = subprocess.run(
            [python, "-c", f"import {top}"],
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"`{python} -c 'import {top}'` did not finish within {IMPORT_TIMEOUT_S:g} s"
    except OSError as exc:
        return True, str(exc)
    if done.returncode == 0:
        return False, ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return True, lines[-1].strip()[:200] if lines else f"exit status {done.returncode}"


def _unreachable(url: str) -> str | None:
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return "no host in the address"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return str(exc)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


# How long a url that takes the connection may stay silent before check says so (a server busy
# with a request answers /health in far less; a listener that never answers does not in minutes).
SILENT_AFTER_S = 2.0


def _silent(url: str) -> str | None:
    """Why a url that takes connections does not answer HTTP, or None where it answers (any byte,
    a closed connection included) or cannot be asked in plain HTTP (https)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return None
    try:
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=CONNECT_TIMEOUT_S) as conn:
            conn.sendall(f"GET /health HTTP/1.0\r\nHost: {parts.hostname}\r\n\r\n".encode())
            conn.settimeout(SILENT_AFTER_S)
            conn.recv(1)
    except TimeoutError:
        return f"it takes the connection but sent no byte of an answer to GET /health within {SILENT_AFTER_S:g} s"
    except OSError:
        return None  # refused or reset now: said by the run, which waits for it
    return None


def credential_problems(dep: Deployment) -> list[str]:
    """Every credential `dep` reads from this environment that is missing or unusable, each
    naming the file, the field, the variable and the configs it keeps from starting."""
    out = []
    if dep.launch.api_key_env is not None:
        try:
            api_key(dep.launch.api_key_env)
        except SpecgateError as exc:
            out.append(f"{dep.path}: {exc} (every config's server is started with it: {', '.join(dep.configs)})")
    for name, cfg in dep.configs.items():
        if cfg.url is None:
            continue
        try:
            expand_url(cfg.url, f"{dep.path}: configs.{name}.url (config {name})")
        except SpecgateError as exc:
            out.append(str(exc))
    return out


def boot_problems(dep: Deployment) -> list[Problem]:
    """What keeps `dep`'s servers from starting from this host (warnings for `specgate check`;
    the certain ones are what the plugin skips a plain pytest's gate for)."""
    out: list[Problem] = []
    launch = dep.launch
    if launch.launcher == "ssh":
        if shutil.which("ssh") is None:
            out.append(
                Problem('launch.launcher = "ssh", but no ssh client is on this host\'s PATH: no server boots from here', True)
            )
        return out
    if launch.launcher == "url":
        for name, cfg in dep.configs.items():
            why = _unreachable(cfg.url) if cfg.url else None
            if why is not None:
                out.append(Problem(f"config {name}: {cfg.url} does not answer from this host ({why})", True))
            elif cfg.url and (silent := _silent(cfg.url)) is not None:
                # Not certain (a server may be stalled for a moment): a warning, never a skip.
                out.append(Problem(f"config {name}: {cfg.url} does not answer from this host ({silent})", False))
        return out
    root = project.current().root
    values = {"python": sys.executable, "repo": str(root), "model": dep.model}
    by_command: dict[tuple[str, ...], list[str]] = {}
    for name, cfg in dep.configs.items():
        by_command.setdefault(cfg.launch_command(launch), []).append(name)
    asked: dict[tuple[str, str], tuple[bool | None, str]] = {}
    for command, names in by_command.items():
        who = f"config{'s' if len(names) > 1 else ''} {', '.join(names)}"
        program = read_program(command, values)
        if program is None:
            continue
        if _resolve(program.executable, root) is None:
            out.append(Problem(f"{who}: program {program.executable!r} not found on this host: no server boots here", True))
            continue
        if program.python is None or program.module is None or program.module.split(".")[0] == _OWN_MODULE:
            continue
        python = _resolve(program.python, root)
        if python is None:
            out.append(Problem(f"{who}: {program.python!r} (the command's Python) not found on this host: no server boots here", True))
            continue
        if program.python == sys.executable:
            python = sys.executable
        env = {**os.environ}
        for cfg_name in names:
            env.update({k: expand_placeholders(v, values) for k, v in {**launch.env, **dep.configs[cfg_name].env}.items()})
        key = (python, program.module.split(".")[0])
        if key not in asked:
            asked[key] = _cannot_import(python, program.module, env, root)
        cannot, why = asked[key]
        shown = program.python if program.python == python else f"{program.python} ({python})"
        if cannot:
            out.append(
                Problem(
                    f"{who}: {shown} cannot import {key[1]!r} ({program.module}): no server boots on this host"
                    + (f" [{why}]" if why else ""),
                    True,
                )
            )
        elif cannot is None:
            out.append(Problem(f"{who}: could not tell whether {shown} imports {key[1]!r}: {why}", False))
    return out
