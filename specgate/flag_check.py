"""Whether SGLang would take each config's launch flags, asked before anything boots.

A refused flag costs a boot to find out: minutes on a small model, an hour on a large one on
eight GPUs. So `specgate check` and a run ask first, in this order:

1. the parser of the SGLang that the launch command's Python imports (a local launch whose
   command is `PYTHON -m sglang.launch_server`, or `sglang serve` through its script's Python):
   SGLang itself decides (`sglang_cli.PROBE_SOURCE`, run in that Python, no model, no GPU);
2. otherwise the table of the release the deployment declares (`sglang_release`, per config or
   in [launch]), of the release a simulator config claims (`--sim-release`), or of the newest
   release specgate knows, saying which.

A refusal is certain (bad input, exit 2) where SGLang's own parser gave it, or a table did for a
plain launch whose release is declared or whose Python has no SGLang here at all. What only a
guess could say is a warning: a wrapper command (`bash -c ...`, a container) whose flags may not
reach SGLang as written, a `--config` file SGLang merges before parsing, a launch Python whose
SGLang could not be asked (it hung, crashed or answered garbage: the reason is said), a release
newer than any table, a url server (its flags are a declaration: it already runs), a simulator
that claims no release. An abbreviation SGLang takes (`--tp` for `--tp-size`) is named with its
full flag: specgate reads flags by their full names.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from specgate import context_fit, project, sglang_cli
from specgate.deployment import Deployment, ServerConfig, expand_placeholders
from specgate.preflight import read_program

PROBE_TIMEOUT_S = 120.0  # importing SGLang's server_args pulls in torch: tens of seconds on a cold host
SGLANG_MODULES = ("sglang.launch_server", "sglang.cli.main", "sglang")
SIM_MODULE = "specgate.sim"
MERGED_FIRST = "--config"  # SGLang merges this YAML file into the command line before parsing it
MOST_REFUSALS = 5  # argparse stops at a line's first error: the rest are found by asking again without it


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
    whole_line: bool = True  # a whole command line (a url config's flags are a declaration: none required)


@dataclass(frozen=True)
class _Probe:
    """What asking a launch Python's SGLang gave: its answers, or why there are none."""

    release: str | None = None
    answers: tuple[str | None, ...] = ()
    absent: bool = False  # that Python has no `sglang` module at all: the table is then certain
    why: str = ""  # why it could not be asked (it hung, crashed, answered garbage)


def _owned_flags(dep: Deployment) -> list[str]:
    """The flags the launcher adds, with stand-in values: argparse must see the whole line."""
    out = ["--host", "127.0.0.1", "--port", "30000", "--nccl-port", "30001"]
    if dep.launch.api_key_env:
        out += ["--api-key", "KEY"]
    ssh = dep.launch.ssh
    if dep.launch.launcher == "ssh" and ssh is not None and ssh.nodes > 1:
        out += ["--nnodes", str(ssh.nodes), "--node-rank", "0", "--dist-init-addr", "127.0.0.1:5000"]
    return out


def _claimed_release(argv: list[str]) -> str | None:
    """The release a simulator command line claims, read by the simulator's own parser (the last
    one given, an abbreviation too), so that check and the simulator read the same."""
    import contextlib
    import io

    from specgate.sim.__main__ import build_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            known, _ = build_parser().parse_known_args(argv)
    except SystemExit:  # another simulator flag the simulator refuses: its boot says so
        given = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--sim-release"]
        return given[-1] if given else None
    return known.sim_release


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


def _script_python(executable: str) -> str | None:
    """The Python an installed `sglang` script runs, from its first line (`#!/venv/bin/python`)."""
    path = shutil.which(executable)
    if path is None:
        return None
    try:
        with open(path, "rb") as script:
            first = script.readline(500).decode(errors="replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and Path(words[0]).name == "env" and len(words) > 1:
        return shutil.which(words[1])
    return words[0] if words else None


def _probe(python: str, argvs: list[list[str]], env: dict[str, str]) -> _Probe:
    """SGLang's own parser's answers, in `python`, in a process group of its own (a child it leaves
    behind is ended with it), within PROBE_TIMEOUT_S."""
    print(
        f"specgate: asking the SGLang that {python} imports about the launch flags (up to {PROBE_TIMEOUT_S:g} s)",
        file=sys.stderr,
        flush=True,
    )
    try:
        proc = subprocess.Popen(
            [python, "-c", sglang_cli.PROBE_SOURCE],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            cwd=project.current().root, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        return _Probe(why=f"it could not be started: {exc}")
    try:
        out, err = proc.communicate(json.dumps(argvs), timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _end_group(proc)
        return _Probe(why=f"it did not answer within {PROBE_TIMEOUT_S:g} s")
    finally:
        _end_group(proc)
    lines = [line for line in out.strip().splitlines() if line.strip()]
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        tail = (err.strip().splitlines() or ["no output"])[-1][:200]
        return _Probe(why=f"it answered no verdict (exit status {proc.returncode}; {tail})")
    if not answer.get("imported"):
        why = str(answer.get("why", ""))
        absent = why.startswith("ModuleNotFoundError") and "'sglang'" in why
        return _Probe(absent=absent, why=f"importing SGLang's server_args failed: {why}")
    answers = answer.get("answers")
    if not isinstance(answers, list) or len(answers) != len(argvs):
        return _Probe(why="it answered for other command lines than it was asked about")
    release = answer.get("release")
    return _Probe(
        release=None if release is None else str(release),
        answers=tuple(None if a is None else str(a) for a in answers),
    )


def _end_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _table_judge(declared: str | None, what: str, certain: bool) -> _Judge:
    """The table of a declared release, or of the newest one specgate knows where none is declared
    or specgate has no table for it (then not certain)."""
    newest = sglang_cli.newest()
    if declared is not None:
        release = sglang_cli.parse_release(declared)
        table = sglang_cli.table_for(release)
        if table is not None and release is not None and release[:3] <= newest.release[:3]:
            same = "" if table.name == declared else f" (read as {table.name})"
            return _Judge(table, f"SGLang {declared}'s parser table{same}, {what}", certain)
        oldest = sglang_cli.tables()[0]
        why = (
            f"{declared} is older than any release specgate reads ({oldest.name})"
            if release is not None and release < oldest.release
            else f"no table for {declared}; a specgate release that knows it ships its table"
        )
        return _Judge(newest, f"SGLang {newest.name}'s parser table, the newest specgate has ({what}); {why}", False)
    return _Judge(newest, f"SGLang {newest.name}'s parser table, the newest specgate has ({what})", certain)


def _judges(dep: Deployment) -> tuple[dict[str, tuple[_Judge, list[str]]], list[FlagFinding]]:
    """Per config: what decides its flags, and the command line it is asked about; and what asking
    found beside (a declared release that is not the one the launch Python imports)."""
    out: dict[str, tuple[_Judge, list[str]]] = {}
    notes: list[FlagFinding] = []
    root = project.current().root
    values = {"python": sys.executable, "repo": str(root), "model": dep.model}
    to_probe: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[list[str], dict[str, str]]] = {}
    for name, cfg in dep.configs.items():
        declared = cfg.declared_release(dep.launch)
        command = cfg.launch_command(dep.launch)
        if dep.launch.launcher == "url":
            argv = [*dep.launch.args, *cfg.args]
            what = "declared; a url server already runs" if declared else "a url server's flags are a declaration"
            out[name] = (_Judge(*_table_parts(declared, what), False, whole_line=False), argv)
            continue
        program = read_program(command, values)
        module = program.module if program is not None else None
        if module == SIM_MODULE:
            argv = final_argv(dep, cfg, _after_module(command, module))
            claimed = _claimed_release(argv)
            what = "the release the SIMULATOR claims (--sim-release)" if claimed else "the SIMULATOR claims no release"
            from specgate.sim.__main__ import sglang_argv

            out[name] = (_table_judge(claimed, what, claimed is not None), sglang_argv(argv))
            continue
        python, after = None, []
        if program is not None and Path(program.executable).name == "sglang" and command[1:2] == ("serve",):
            python, after = _script_python(expand_placeholders(program.executable, values)), list(command[2:])
        elif (
            program is not None
            and program.python is not None
            and program.executable == program.python
            and module in SGLANG_MODULES
        ):
            python, after = program.python, _after_module(command, module or "")
        argv = final_argv(dep, cfg, after)
        if python is None and not (program is not None and Path(program.executable).name == "sglang"):
            what = "its command is a wrapper, whose flags may not reach SGLang as written"
            out[name] = (_table_judge(declared, f"declared; {what}" if declared else what, False), argv)
            continue
        if MERGED_FIRST in sglang_cli.option_words(argv):
            what = f"{MERGED_FIRST} names a file SGLang merges into the line before parsing: not checked here"
            out[name] = (_table_judge(declared, what, False), argv)
            continue
        where = "declared" if declared else (
            "ssh hosts are not asked" if dep.launch.launcher == "ssh" else "no SGLang importable here"
        ) + ("" if declared else "; where the servers run an older release, declare it (launch.sglang_release)")
        out[name] = (_table_judge(declared, where, True), argv)
        if dep.launch.launcher == "local" and python is not None:
            python = expand_placeholders(python, values)
            env = {**os.environ, **{k: expand_placeholders(v, values) for k, v in {**dep.launch.env, **cfg.env}.items()}}
            key = (python, tuple(sorted((k, v) for k, v in env.items() if k.startswith("PYTHON"))))
            to_probe.setdefault(key, ([], env))[0].append(name)  # the first config's environment asks for all
    for (python, _), (names, env) in to_probe.items():
        probe = _probe(python, [out[n][1] for n in names], env)
        for i, name in enumerate(names):
            judge, argv = out[name]
            if probe.answers:
                release = probe.release or "(release unknown)"
                table = sglang_cli.table_for(sglang_cli.parse_release(release))
                source = f"SGLang {release}'s own parser ({python} imports it)"
                out[name] = (_Judge(table, source, True, asked_sglang=True, answer=probe.answers[i]), argv)
                declared = dep.configs[name].declared_release(dep.launch)
                if declared and sglang_cli.parse_release(declared) != sglang_cli.parse_release(release):
                    notes.append(FlagFinding(
                        (name,), f"declares SGLang {declared} (sglang_release), but {python} imports {release}: "
                        "its own parser judged the flags", False,
                    ))  # fmt: skip
            elif not probe.absent:
                uncertain = f"SGLang's own parser in {python} could not be asked: {probe.why}"
                out[name] = (_Judge(judge.table, f"{judge.source}; {uncertain}", False), argv)
    return out, notes


def _table_parts(declared: str | None, what: str) -> tuple[sglang_cli.ReleaseTable | None, str]:
    judge = _table_judge(declared, what, False)
    return judge.table, judge.source


def _refusals(judge: _Judge, argv: list[str]) -> list[str]:
    """Every refusal the judge gives `argv`: argparse stops at the first, so each refused flag is
    taken out and the line asked again (a table's alone: SGLang's own parser was asked once)."""
    if judge.asked_sglang:
        return [judge.answer] if judge.answer else []
    if judge.table is None:
        return []
    out: list[str] = []
    line = list(argv)
    while len(out) < MOST_REFUSALS:
        message = judge.table.refusal(line, whole_line=judge.whole_line)
        if message is None:
            break
        out.append(message)
        flag = sglang_cli.first_refused_flag(message, line)
        if flag is None or flag not in sglang_cli.option_words(line):
            break
        line = sglang_cli.without(line, flag)
    return out


def _advice(judge: _Judge, message: str, argv: list[str]) -> str:
    flag = sglang_cli.first_refused_flag(message, argv)
    if flag is None:
        return ""
    replacement = sglang_cli.replacement(flag)
    if replacement:
        return f"; write {sglang_cli.pasteable(replacement)} instead"
    if "unrecognized" in message or "ambiguous" in message:
        table = judge.table or sglang_cli.newest()
        known = sorted(f for o in table.options for f in o.flags if f != flag)
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.85)
        if close:
            return f"; did you mean {close[0]}?"
    return ""


def _who(judge: _Judge) -> str:
    """Whose word a refusal is, shortly (`specgate check` lists each judge in full)."""
    if judge.asked_sglang:
        return judge.source.split("'s own parser")[0] + " (its own parser)"
    return f"SGLang {judge.table.name} (its parser table)" if judge.table is not None else "SGLang"


def check_flags(dep: Deployment) -> FlagReport:
    """Every config's launch flags against SGLang's parser, or its release's table."""
    findings: dict[tuple[str, bool], list[str]] = {}
    by_source: dict[str, list[str]] = {}
    judges, notes = _judges(dep)
    for name, (judge, argv) in judges.items():
        by_source.setdefault(judge.source, []).append(name)
        for help_flag in ("-h", "--help"):
            if help_flag in argv:
                findings.setdefault((f"{help_flag} makes SGLang print its help and exit: no server starts", True), []).append(name)
        for message in _refusals(judge, argv):
            who = _who(judge)
            text = f"{who} would refuse the launch flags: {message}{_advice(judge, message, argv)}"
            if not judge.certain:
                text += " [a warning: not certain for this launch]"
            findings.setdefault((text, judge.certain), []).append(name)
        table = judge.table
        if table is None:
            continue
        for flag, instead in table.deprecated_in(argv):
            findings.setdefault((f"{flag} is deprecated in SGLang {table.name}: write {instead}", False), []).append(name)
        for flag, full in table.abbreviated_in(argv):
            text = f"{flag} is an abbreviation SGLang reads as {full}; specgate reads flags by their full names: write {full}"
            findings.setdefault((text, False), []).append(name)
    simulated = dep.simulated
    root = project.current().root
    model = Path(expand_placeholders(dep.model, {"python": sys.executable, "repo": str(root), "model": dep.model}))
    for name, (_judge, argv) in judges.items():
        # A context bucket the launch cannot hold would fail request by request, after boots.
        model_path = str(model if model.is_absolute() else root / model)
        for text in context_fit.refusals(dep, name, argv, simulated[name], model_path):
            findings.setdefault((text, True), []).append(name)
        if (why := context_fit.unchecked(dep, argv, simulated[name], model_path)) is not None:
            findings.setdefault((why, False), []).append(name)
    for name, cfg in dep.configs.items():
        declared = cfg.declared_release(dep.launch)
        release = sglang_cli.parse_release(declared) if declared else None
        if release is not None and release < sglang_cli.SUPPORTED_FROM:
            first, last = sglang_cli.supported()[0].name, sglang_cli.newest().name
            text = f"SGLang {declared} is older than the releases specgate supports ({first} to {last}): its flags are checked, its diagnosis is not kept up"
            findings.setdefault((text, False), []).append(name)
    said = [
        FlagFinding(tuple(names), f"config{'s' if len(names) > 1 else ''} {', '.join(names)}: {text}", refuses)
        for (text, refuses), names in findings.items()
    ]
    return FlagReport(
        [*said, *(FlagFinding(n.configs, f"config {n.configs[0]}: {n.text}", False) for n in notes)],
        [f"launch flags of {', '.join(names)}: checked by {source}" for source, names in by_source.items()],
    )
