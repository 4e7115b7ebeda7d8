"""Whether SGLang would take each config's launch flags, asked before anything boots.

A refused flag costs a boot to find out: minutes on a small model, an hour on a large one on
eight GPUs. So `specgate check` and a run ask first, in this order:

1. the parser of the SGLang that the launch command's Python imports (a local launch whose
   command is `PYTHON -m sglang.launch_server` or `sglang serve`): SGLang itself decides
   (`sglang_cli.PROBE_SOURCE`, run in that Python, no model, no GPU);
2. otherwise the table of the release the deployment declares (`sglang_release`, per config or
   in [launch]), of the release a simulator config claims (`--sim-release`), or of the newest
   release specgate knows, saying which (`sglang_cli`, tables built from the released wheels).

A refusal by SGLang's own parser, by a declared release's table, or (for a local or ssh launch
that declares nothing) by the newest release's, refuses the run (exit 2), naming the config, the
flag, the release and what replaces the flag. What only a guess could say is a warning: a
wrapper command (`bash -c ...`, a container) whose flags may not reach SGLang as written, a
simulator that claims no release, a url server (its flags are a declaration: it already runs).
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from specgate import project, sglang_cli
from specgate.deployment import Deployment, ServerConfig, expand_placeholders
from specgate.preflight import read_program

PROBE_TIMEOUT_S = 120.0  # importing SGLang's server_args pulls in torch: tens of seconds on a cold host
SGLANG_MODULES = ("sglang.launch_server", "sglang.cli.main", "sglang")
SIM_MODULE = "specgate.sim"
SIM_ONLY_PREFIX = "--sim-"  # the simulator's own flags, never SGLang's: each takes one value


@dataclass(frozen=True)
class FlagFinding:
    configs: tuple[str, ...]
    text: str
    refuses: bool  # SGLang (or the table standing for it) would refuse the launch: bad input


@dataclass(frozen=True)
class FlagReport:
    findings: list[FlagFinding]
    judged_by: list[str]  # one line per way the configs' flags were judged

    @property
    def refusals(self) -> list[FlagFinding]:
        return [f for f in self.findings if f.refuses]


@dataclass(frozen=True)
class _Judge:
    """What decides one config's flags, and how to say so."""

    table: sglang_cli.ReleaseTable | None  # the release's table (for SGLang's own parser: its release's, if known)
    source: str
    certain: bool  # a refusal refuses the run
    asked_sglang: bool = False  # SGLang's own parser answered: `answer` is its word
    answer: str | None = None  # the real parser's message, None where it took the line


def _owned_flags(dep: Deployment) -> list[str]:
    """The flags the launcher adds, with stand-in values: argparse must see the whole line."""
    out = ["--host", "127.0.0.1", "--port", "30000", "--nccl-port", "30001"]
    if dep.launch.api_key_env:
        out += ["--api-key", "KEY"]
    ssh = dep.launch.ssh
    if dep.launch.launcher == "ssh" and ssh is not None and ssh.nodes > 1:
        out += ["--nnodes", str(ssh.nodes), "--node-rank", "0", "--dist-init-addr", "127.0.0.1:5000"]
    return out


def _strip_sim_only(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg.startswith(SIM_ONLY_PREFIX):
            skip = "=" not in arg
        else:
            out.append(arg)
    return out


def _value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def final_argv(dep: Deployment, cfg: ServerConfig, after_program: list[str]) -> list[str]:
    """What SGLang's parser is handed for `cfg`: the command's own flags, launch.args, the
    config's args, and the launcher's flags."""
    values = {"python": sys.executable, "repo": str(project.current().root), "model": dep.model}
    words = [expand_placeholders(w, values) for w in (*after_program, *dep.launch.args, *cfg.args)]
    return words + _owned_flags(dep)


def _after_module(command: tuple[str, ...], module: str) -> list[str]:
    words = list(command)
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words) and words[i + 1] == module:
            rest = words[i + 2 :]
            return rest[1:] if module != "sglang.launch_server" and rest[:1] == ["serve"] else rest
    return []


def _probe(python: str, argvs: list[list[str]], env: dict[str, str]) -> dict | None:
    """SGLang's own parser's answers, in `python`; None where that Python has no usable SGLang."""
    try:
        done = subprocess.run(
            [python, "-c", sglang_cli.PROBE_SOURCE],
            input=json.dumps(argvs),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env=env,
            cwd=project.current().root,
        )
        answer = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(answer, dict) or not answer.get("imported") or len(answer.get("answers") or []) != len(argvs):
        return None
    return answer


def _table_judge(declared: str | None, what: str, certain: bool) -> _Judge:
    """The table of a declared release, or of the newest one specgate knows where none is declared
    or specgate has no table for it."""
    newest = sglang_cli.newest()
    if declared is not None:
        table = sglang_cli.table_for(sglang_cli.parse_release(declared))
        if table is not None:
            same = "" if table.name == declared else f" (read as {table.name})"
            return _Judge(table, f"SGLang {declared}'s parser table{same}: {what}", certain)
        return _Judge(
            newest,
            f"SGLang {newest.name}'s parser table, the newest release specgate knows: {what} {declared}, "
            "which specgate has no table for (`python3 tools/sglang_cli_tables.py` adds it)",
            False,
        )
    return _Judge(newest, f"SGLang {newest.name}'s parser table, the newest release specgate knows: {what}", certain)


def _judges(dep: Deployment) -> dict[str, tuple[_Judge, list[str]]]:
    """Per config: what decides its flags, and the command line it is asked about."""
    out: dict[str, tuple[_Judge, list[str]]] = {}
    root = project.current().root
    values = {"python": sys.executable, "repo": str(root), "model": dep.model}
    to_probe: dict[tuple[str, tuple[tuple[str, str], ...]], list[str]] = {}
    for name, cfg in dep.configs.items():
        declared = cfg.declared_release(dep.launch)
        command = cfg.launch_command(dep.launch)
        if dep.launch.launcher == "url":
            argv = [*dep.launch.args, *cfg.args]
            out[name] = (_table_judge(declared, "declared for a server attached by url, which already runs"
                                      if declared else "a url server's flags are its declaration", False), argv)
            continue
        program = read_program(command, values)
        module = program.module if program is not None else None
        if module == SIM_MODULE:
            argv = final_argv(dep, cfg, _after_module(command, module))
            claimed = _value(argv, "--sim-release")
            judge = _table_judge(claimed, "the release the SIMULATOR claims (--sim-release)" if claimed else
                                 "the SIMULATOR claims no release (--sim-release)", claimed is not None)
            out[name] = (judge, _strip_sim_only(argv))
            continue
        wrapped = program is None or program.python is None or module not in SGLANG_MODULES
        if program is not None and Path(program.executable).name == "sglang" and command[1:2] == ("serve",):
            wrapped, after = False, list(command[2:])
        else:
            after = _after_module(command, module) if module else []
        argv = final_argv(dep, cfg, after)
        if wrapped:
            what = "its command is a wrapper, whose flags may not reach SGLang as written"
            out[name] = (_table_judge(declared, f"declared; {what}" if declared else what, False), argv)
            continue
        if dep.launch.launcher == "local" and program is not None and program.python is not None and not declared:
            env = {**os.environ, **{k: expand_placeholders(v, values) for k, v in {**dep.launch.env, **cfg.env}.items()}}
            key = (program.python, tuple(sorted((k, v) for k, v in env.items() if k.startswith("PYTHON"))))
            to_probe.setdefault(key, []).append(name)
        where = "declared" if declared else (
            "ssh hosts are not asked" if dep.launch.launcher == "ssh" else "no SGLang importable here"
        ) + ("" if declared else "; where the servers run an older release, declare it (launch.sglang_release)")
        out[name] = (_table_judge(declared, where, True), argv)
    for (python, _), names in to_probe.items():
        cfg0 = dep.configs[names[0]]
        env = {**os.environ, **{k: expand_placeholders(v, values) for k, v in {**dep.launch.env, **cfg0.env}.items()}}
        answer = _probe(expand_placeholders(python, values), [out[n][1] for n in names], env)
        if answer is None:
            continue  # that Python has no SGLang here: the table stands, as said
        release = answer.get("release") or "(release unknown)"
        for name, message in zip(names, answer["answers"], strict=True):
            argv = out[name][1]
            judged = sglang_cli.table_for(sglang_cli.parse_release(release))
            source = f"SGLang {release}'s own parser ({python} imports it)"
            out[name] = (_Judge(judged, source, True, asked_sglang=True, answer=message), argv)
    return out


def _refusal_text(judge: _Judge, message: str, argv: list[str]) -> str:
    table = judge.table or sglang_cli.newest()
    flag = sglang_cli.first_refused_flag(table, message, argv)
    instead = ""
    if flag is not None:
        replacement = sglang_cli.replacement(flag)
        if replacement:
            instead = f"; write {replacement} instead"
        elif "unrecognized" in message:
            known = sorted(f for o in table.options for f in o.flags)
            close = difflib.get_close_matches(flag, known, n=1, cutoff=0.85)
            if close:
                instead = f"; did you mean {close[0]}?"
    return f"SGLang would refuse the launch flags: {message} (said by {judge.source}){instead}"


def check_flags(dep: Deployment) -> FlagReport:
    """Every config's launch flags against SGLang's parser, or its release's table."""
    findings: dict[tuple[str, bool], list[str]] = {}
    by_source: dict[str, list[str]] = {}
    for name, (judge, argv) in _judges(dep).items():
        by_source.setdefault(judge.source, []).append(name)
        if judge.asked_sglang:
            message = judge.answer
        else:
            whole = dep.launch.launcher != "url"  # a url config's flags are a declaration, not a command line
            message = judge.table.refusal(argv, whole_line=whole) if judge.table is not None else None
        if message:
            text = _refusal_text(judge, message, argv)
            if not judge.certain:
                text += " [a warning: not certain for this launch]"
            findings.setdefault((text, judge.certain), []).append(name)
            continue
        table = judge.table
        if table is None:
            continue
        for flag, instead in table.deprecated_in(argv):
            text = f"{flag} is deprecated in SGLang {table.name}" + (
                f": write {instead}" if instead else ""
            ) + f" (said by {judge.source})"
            findings.setdefault((text, False), []).append(name)
    return FlagReport(
        [
            FlagFinding(tuple(names), f"config{'s' if len(names) > 1 else ''} {', '.join(names)}: {text}", refuses)
            for (text, refuses), names in findings.items()
        ],
        [f"launch flags of {', '.join(names)}: checked by {source}" for source, names in by_source.items()],
    )
