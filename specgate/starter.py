"""`specgate init`: a starting project in the user's repository.

Writes `specgate.toml` (where the deployments, baselines and reports live) and one deployment:
the SIMULATOR's (a copy of the built-in `sim`, with the simulator's stored baseline, so the
first `pytest` there runs the whole gate and compares), a deployment for an SGLang launch
command, or one for two running servers (a plain one and a speculative one). Every file
written passes `specgate check`; nothing existing is overwritten without `--force`.

Only the simulator's settings say `gate = true`: a real deployment boots SGLang servers (a GPU,
minutes each), which a plain `pytest` in the user's repository must not do as a side effect,
nor fail on a laptop without SGLang. Its gate runs where the user asks for it: `specgate
baseline update` and then `specgate run` on the GPU runner (init's closing words say so).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from specgate.client import url_problem
from specgate.deployment import LAUNCHER_OWNED_FLAGS, parse_deployment
from specgate.errors import HTTPStatusError, SpecgateError
from specgate.project import SETTINGS_FILE
from specgate.resources import builtin_baselines_dir, builtin_deployments_dir, shipped_baseline_files
from specgate.secrets import redact, remember_url, secret_flag
from specgate.server.idle import SLEEP_ON_IDLE, gives_sleep_on_idle
from specgate.server_flags import supported_spelling
from specgate.tomlcheck import safe_name_problem

SETTINGS_TEXT = """\
# specgate's settings for this repository (paths are relative to this file).
deployment = "{deployment}"   # what `pytest` and `specgate run` gate by default
deployments = "deployments"   # `specgate run NAME` looks here first, then among the built-ins
baselines = "baselines"       # stored baselines: commit them
report_dir = "specgate-report" # report.md/json/png, server logs, benchmark.json: keep out of git
{gate}
"""

# The simulator runs anywhere in seconds: a plain `pytest` may run it beside the user's tests.
GATE_ON = "gate = true                   # a plain `pytest` here runs the gate (the SIMULATOR) as well as your own tests"
# A real deployment boots SGLang servers (minutes each, a GPU): never a side effect of `pytest`.
GATE_OFF = """\
gate = false                  # your SGLang servers boot only for `specgate run` / `specgate baseline update`
                              # (on the GPU runner); true adds the gate to every plain `pytest` here,
                              # skipped with its reason where the servers cannot start (no SGLang here)"""

# The speculative flags `--launch` may carry: they make the speculative configs; the rest of
# the command is the plain reference.
SPEC_PREFIX = "--speculative-"
# SGLang's multi-node flags: one local process cannot be several nodes (launcher = "ssh" starts them).
MULTI_NODE_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr")
_ENV_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
EAGLE3_DEFAULTS = (
    "--speculative-num-steps",
    "2",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "3",
)


class InitError(SpecgateError):
    """What `specgate init` was asked to do cannot be done (the message names the option)."""


@dataclass
class Written:
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)  # what to run next, in order: init's closing words


def _toml_string(value: str) -> str:
    """`value` as a TOML basic string. JSON's escapes are TOML's, but json.dumps spells a character
    outside the BMP (an emoji in a server's path) as a surrogate pair, which TOML refuses: the file
    init wrote did not load, a raw traceback. So characters are written as they are, with DEL
    escaped (TOML forbids it raw); a lone surrogate (bytes a command line could not decode) is no
    text at all. (tomli_w, the field's writer, is a test dependency only, and has no string API.)"""
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        raise InitError(f"{value.encode('utf-8', 'surrogateescape')!r}: expected text (UTF-8), got bytes that are not")
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_list(items: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(_toml_string(i) for i in items) + "]"


def _split_flags(tokens: list[str]) -> list[list[str]]:
    """`--flag value`, `--flag=value` and bare `--switch` as groups, in order."""
    groups: list[list[str]] = []
    for tok in tokens:
        if tok.startswith("--") or not groups:
            groups.append([tok])
        else:
            groups[-1].append(tok)
    return groups


def launch_deployment(name: str, command_line: str, draft: str | None) -> tuple[str, list[str]]:
    """A deployment's text for an SGLang launch command: the command's own flags are the plain
    baseline; its --speculative-* flags (or --draft) make EAGLE-3 in prefill and in decode
    attention mode. Returns (text, notes)."""
    try:
        # A command copied from a shell script keeps its line continuations.
        tokens = shlex.split(command_line.replace("\\\r\n", " ").replace("\\\n", " "))
    except ValueError as exc:
        raise InitError(f"--launch: cannot split {command_line!r} as a shell command: {exc}") from None
    if not tokens:
        raise InitError(
            "--launch: the command is empty; give the SGLang command, e.g. 'python -m sglang.launch_server --model-path M'"
        )
    env: dict[str, str] = {}
    while tokens and _ENV_WORD.fullmatch(tokens[0]):  # `CUDA_VISIBLE_DEVICES=0,1 python ...`
        name, setting = tokens.pop(0).split("=", 1)
        env[name] = setting
    at = next((i for i, t in enumerate(tokens) if t.startswith("--")), len(tokens))
    program, groups = tokens[:at], _split_flags(tokens[at:])
    if not program:
        raise InitError(
            "--launch: the command starts with a flag; give the program first (python -m sglang.launch_server ...)"
        )
    notes: list[str] = [f"{', '.join(env)} moved to launch.env"] if env else []
    base: list[str] = []
    spec: list[str] = []
    model: str | None = None
    for group in groups:
        flag = group[0].split("=", 1)[0]
        value = group[0].split("=", 1)[1] if "=" in group[0] else (group[1] if len(group) > 1 else None)
        if flag in MULTI_NODE_FLAGS:
            raise InitError(
                f"--launch: {flag} starts one node of several; a local launch is one process. Write a deployment "
                'with launch.launcher = "ssh" and one host per node (README, "Remote hosts (ssh) and multi-node")'
            )
        if flag in LAUNCHER_OWNED_FLAGS:
            notes.append(f"dropped {' '.join(group)}: specgate picks the host and free ports itself")
            continue
        if secret := secret_flag(group[0]):
            taken = "" if flag == secret else f" (SGLang takes it for {secret})"
            notes.append(
                f"dropped {flag}{taken}: a key never goes into a file; set launch.api_key_env to the variable that holds it"
            )
            continue
        if flag in ("--model-path", "--model"):
            model = value
        group, spelling = supported_spelling(group)
        if spelling:
            notes.append(spelling)
        (spec if flag.startswith(SPEC_PREFIX) else base).extend(group)
    if model is None:
        raise InitError("--launch: the command has no --model-path; specgate needs to know the model it gates")
    spec = [t for g in _split_flags(spec) if not g[0].startswith("--speculative-attention-mode") for t in g]
    if not spec:
        if draft is None:
            raise InitError(
                "--launch: the command has no --speculative-* flags; add them, or give --draft PATH (the EAGLE-3 draft "
                "model) and specgate writes EAGLE-3 with 2 steps, topk 1, 3 draft tokens"
            )
        spec = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft, *EAGLE3_DEFAULTS]
    elif draft is not None:
        notes.append("--draft ignored: the command already names its --speculative-* flags")
    if not gives_sleep_on_idle(base):
        base.append(SLEEP_ON_IDLE)
        notes.append(
            f"added {SLEEP_ON_IDLE} to launch.args: an idle server then waits instead of spinning a host core, so with "
            "coexist = true the servers idle beside the measured one leave it the cores it needs (one server at a "
            "time it changes nothing measured)"
        )
    text = f"""\
# Written by `specgate init --launch`: your command's flags are the plain reference, its
# speculative flags run in both attention modes. Check it with `specgate check {name}`.
name = {_toml_string(name)}
description = "plain vs EAGLE-3 in prefill and decode attention mode"
model = {_toml_string(model)}
reference = "baseline"

[launch]
launcher = "local"
command = {_toml_list(program)}
# {SLEEP_ON_IDLE}: an idle server waits on its sockets instead of spinning a host core, which servers
# side by side (coexist = true) need: idle neighbours would poll on the measured server's cores.
args = {_toml_list(base)}{_env_line(env)}
boot_timeout_s = 900
coexist = false            # one server at a time: safe on one GPU; true boots them side by side
# api_key_env = "SGLANG_API_KEY"   # servers with a key: the variable that holds it

[configs.baseline]
description = "plain greedy decoding"
args = []

[configs.eagle3-prefill]
description = "the speculative flags, verify in prefill attention mode (SGLang's default)"
args = {_toml_list([*spec, "--speculative-attention-mode", "prefill"])}

[configs.eagle3-decode]
description = "the same, verify in decode attention mode"
args = {_toml_list([*spec, "--speculative-attention-mode", "decode"])}

{_ab_offer(spec)}
{_gates_tail("eagle3-decode", model)}"""
    return text, notes


def _ab_offer(spec: list[str]) -> str:
    """The other no-regression design, commented out: where the servers can run twice side by side,
    A/B in one run sees a few percent from one run with no stored side (docs/statistics.md)."""
    flags = _toml_list([*spec, "--speculative-attention-mode", "decode"])
    return f"""# No-regression, two designs (docs/statistics.md, "Which design"):
# - a stored baseline (the default here: `specgate baseline update`, then `specgate run`): works
#   where servers take turns (coexist = false), with the wider bar a run-to-run comparison has;
# - A/B in one run: the base build (another install, venv or container; or the base flags or
#   drafter) booted beside the candidate and measured interleaved: the part of the noise the
#   servers of one run share cancels, so it sees a few percent from one run. It needs
#   coexist = true and room for both servers. Uncomment and point `command` at the base build:
# [configs.eagle3-decode-base]
# description = "the same speculative flags on the base build"
# command = ["/path/to/base/bin/python", "-m", "sglang.launch_server"]
# args = {flags}
#
# [[gates.ab]]
# config = "eagle3-decode"
# base = "eagle3-decode-base"
# tolerance = 0.05          # at most 5% slower than the base
# accept_tolerance = 0.03   # at most 3% fewer tokens per verify step
# (and `against_stored = false` under [gates] below, where no stored baseline is kept at all)
"""


def prompt_format_for(model: str) -> str:
    """The chat template a model's name points to: Llama 3's for a Llama-3 model (a Llama-3.1 model
    prompted in ChatML decodes off its template, and its accept length says little), else ChatML."""
    return "llama3" if re.search(r"llama[-_ ]?3", model, re.IGNORECASE) else "chatml"


def _gates_tail(speculative: str, model: str) -> str:
    """What every starting deployment measures and demands of `speculative` (one place for the defaults)."""
    return f"""[workload]
prompt_format = "{prompt_format_for(model)}"   # raw | chatml | llama3: the template your model was trained with
max_new_tokens = 256
repeats = 9

[equivalence]
tie_margin = 0.05
hypothesis_profile = "gpu"

[[gates.beats]]
config = {_toml_string(speculative)}
over = "baseline"
ratio = 1.10               # speculation must be at least 10% faster than plain decoding

[gates.tolerance]
decode_tps = 0.10
accept_length = 0.05
"""


def _env_line(env: dict[str, str]) -> str:
    if not env:
        return ""
    pairs = ", ".join(f"{_toml_string(k)} = {_toml_string(v)}" for k, v in env.items())
    return f"\nenv = {{ {pairs} }}"


# Where the deployment init writes reads each server's password from: a password never goes into
# the file (it is committed), as a key never does (launch.api_key_env).
URL_PASSWORD_ENV = {"--url": "SPECGATE_URL_PASSWORD", "--reference-url": "SPECGATE_REFERENCE_URL_PASSWORD"}


def password_to_env(option: str, url: str) -> tuple[str, str | None]:
    """`url` with its password replaced by `${VARIABLE}` (read when the server is reached), and
    the note that says which variable to export; `url` itself where it has no password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url, None
    variable = URL_PASSWORD_ENV[option]
    user, host = parts.netloc.rpartition("@")[0].partition(":")[0], parts.netloc.rpartition("@")[2]
    written = parts._replace(netloc=f"{user}:${{{variable}}}@{host}").geturl()
    return written, (
        f"the password in {option} is not written into the deployment (it is committed): export it as "
        f"{variable}; the url reads it as ${{{variable}}}"
    )


# The speculative settings a running server reports (/get_server_info, old and new names), as the
# flags that start it: a url config without them declares plain decoding, so it would have no
# accept-length gate and nothing to check its server against (specgate/server/served.py).
SERVED_FLAGS = (
    ("--speculative-algorithm", ("speculative_algorithm",)),
    ("--speculative-draft-model-path", ("speculative_draft_model_path",)),
    ("--speculative-num-steps", ("speculative_num_steps",)),
    ("--speculative-eagle-topk", ("speculative_eagle_topk", "speculative_topk")),
    ("--speculative-num-draft-tokens", ("speculative_num_draft_tokens",)),
    ("--speculative-attention-mode", ("speculative_attention_mode",)),
)
SERVED_EXAMPLE = [
    "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
]  # fmt: skip


def _server_info_at(url: str, timeout_s: float) -> tuple[dict[str, Any] | None, str]:
    """(the /get_server_info of the server at `url`, or None; why not, in words for init's notes
    and the committed file: masked, as the url may hold a password). A 401/403 is an answer: the
    server runs and wants a key, which init never writes into a file."""
    from specgate.client import SglangClient

    client = SglangClient(url, timeout_s=timeout_s)
    try:
        return client.server_info(), ""
    except HTTPStatusError as exc:
        if exc.status in (401, 403):
            return None, (
                f"its /get_server_info answered HTTP {exc.status} when this file was written: the server wants an API "
                "key; set launch.api_key_env to the variable that holds it (init sends none)"
            )
        return None, f"its /get_server_info did not answer when this file was written ({redact(str(exc))[:200]})"
    except SpecgateError as exc:
        return None, f"its /get_server_info did not answer when this file was written ({redact(str(exc))[:200]})"
    finally:
        client.close()


# How long init waits for each server's /get_server_info (asked once per server).
INFO_TIMEOUT_S = 10.0
ServerAnswer = tuple[dict[str, Any] | None, str]  # _server_info_at's: the info, or None and why


def _reference_note(reference_url: str, answer: ServerAnswer) -> str | None:
    """A note for init's closing words where the plain server did not answer (it is read only
    by the run, so nothing in the file depends on it): said now, not first at the run."""
    info, why = answer
    if info is not None:
        return None
    return f"the reference server (--reference-url {redact(reference_url)}): {why}"


def _pairing_notes(spec: dict[str, Any] | None, ref: dict[str, Any] | None, model: str) -> list[str]:
    """What the two servers' /get_server_info say against how init was called: another model
    than --model, or the urls swapped (the plain one speculative, the speculative one plain)."""
    from specgate.server_info import lookup

    notes = []
    for option, info in (("--url", spec), ("--reference-url", ref)):
        served = lookup(info, "model_path") if info is not None else None
        if isinstance(served, str) and served.rstrip("/") != model.rstrip("/"):
            notes.append(f"the {option} server serves {served!r}, not --model {model!r}: another pair of servers?")
    if spec is not None and ref is not None:
        if lookup(spec, "speculative_algorithm") is None and lookup(ref, "speculative_algorithm") is not None:
            notes.append("the --reference-url server runs speculative decoding and the --url one does not: swapped?")
    return notes


def _served_speculative_args(answer: ServerAnswer) -> tuple[list[str] | None, str]:
    """(the flags the server reports it runs with, or None; why not), read from its
    /get_server_info when init writes the file."""
    from specgate.server_info import lookup

    info, why = answer
    if info is None:
        return None, why
    if lookup(info, "speculative_algorithm") is None:
        return None, "its /get_server_info reports no speculative_algorithm (a plain server, or a release that does not say)"
    args: list[str] = []
    for flag, names in SERVED_FLAGS:
        value = lookup(info, *names)
        if value is not None and not isinstance(value, (dict, list)):
            args += [flag, str(value)]
    return args, ""


def _speculative_args_lines(answer: ServerAnswer) -> tuple[str, str | None]:
    """The `args` line of the speculative url config, and a note for init's closing words where
    they could not be read."""
    args, why = _served_speculative_args(answer)
    if args is not None:
        return f"args = {_toml_list(args)}   # as its /get_server_info reported them when init wrote this file", None
    lines = (
        f"# PLACEHOLDER: {why}.\n"
        "# With no speculative flags this config has NO accept-length gate and its server is not checked\n"
        "# against them: write the flags it was started with, e.g.\n"
        f"# args = {_toml_list(SERVED_EXAMPLE)}\n"
        "args = []"
    )
    return lines, (
        f"the speculative server's flags were not read ({why}): configs.speculative.args is a placeholder; "
        "write the flags it runs with, or it has no accept-length gate"
    )


def _same_address(a: str, b: str) -> bool:
    """Whether two urls reach one server: the same port on a host both names resolve to
    (localhost and 127.0.0.1). A name that does not resolve here is not the other's."""
    import socket

    pa, pb = urlsplit(a), urlsplit(b)
    try:
        port_a = pa.port or (443 if pa.scheme == "https" else 80)
        port_b = pb.port or (443 if pb.scheme == "https" else 80)
        if port_a != port_b or not pa.hostname or not pb.hostname:
            return False
        addresses = [{info[4][0] for info in socket.getaddrinfo(h, port_a)} for h in (pa.hostname, pb.hostname)]
    except (OSError, ValueError):
        return False
    return bool(addresses[0] & addresses[1])


def url_deployment(name: str, url: str, reference_url: str, model: str, notes: list[str] | None = None) -> str:
    remember_url(url)  # masked in init's own messages too
    remember_url(reference_url)
    for option, value in (("--url", url), ("--reference-url", reference_url)):
        if not value.startswith(("http://", "https://")) or not urlsplit(value).hostname:
            raise InitError(f"{option}: expected an http:// or https:// address with a host, got {value!r}")
        if (unusable := url_problem(value)) is not None:
            raise InitError(f"{option}: {unusable}")
    if url.rstrip("/") == reference_url.rstrip("/") or _same_address(url, reference_url):
        raise InitError(
            "--url and --reference-url name the same server; the speculative one is compared with another, plain one"
        )
    # Each server asked once: its flags, whether it answered, and what it serves come from one answer.
    spec_answer = _server_info_at(url, INFO_TIMEOUT_S)
    ref_answer = _server_info_at(reference_url, INFO_TIMEOUT_S)
    args_lines, args_note = _speculative_args_lines(spec_answer)
    reachable_note = _reference_note(reference_url, ref_answer)
    pairing = _pairing_notes(spec_answer[0], ref_answer[0], model)
    url, url_note = password_to_env("--url", url)
    reference_url, reference_note = password_to_env("--reference-url", reference_url)
    if notes is not None:
        notes.extend(n for n in (url_note, reference_note, args_note, reachable_note, *pairing) if n)
    return f"""\
# Written by `specgate init --url`: two servers someone else runs, a plain one and a
# speculative one, on the same model. Check it with `specgate check {name}`.
name = {_toml_string(name)}
description = "plain vs speculative, running servers"
model = {_toml_string(model)}
reference = "baseline"

[launch]
launcher = "url"
boot_timeout_s = 120       # the servers already run: waiting long only hides a wrong address
# api_key_env = "SGLANG_API_KEY"   # servers behind a key: the variable that holds it

[configs.baseline]
description = "the plain server"
url = {_toml_string(reference_url)}

[configs.speculative]
description = "the speculative server"
url = {_toml_string(url)}
{args_lines}

{_gates_tail("speculative", model)}"""


# The report folder each run rewrites: committed, a run dirtied the tree that the next
# `baseline update` refuses ("the tree is dirty"), and the dirt was specgate's own.
_REPORT_IGNORE = "specgate-report/"


def _ignore_report_folder(folder: Path) -> Path | None:
    """`.gitignore` names the report folder (appended to, or written); None where it did already."""
    gitignore = folder / ".gitignore"
    text = gitignore.read_text(encoding="utf-8") if gitignore.is_file() else ""
    if any(line.strip().strip("/") == _REPORT_IGNORE.strip("/") for line in text.splitlines()):
        return None
    with gitignore.open("a", encoding="utf-8") as f:
        f.write(("" if not text or text.endswith("\n") else "\n") + "# specgate's report of the last run\n" + _REPORT_IGNORE + "\n")
    return gitignore


def write_project(
    folder: Path,
    *,
    launch: str | None = None,
    url: str | None = None,
    reference_url: str | None = None,
    draft: str | None = None,
    model: str | None = None,
    name: str | None = None,
    force: bool = False,
) -> Written:
    """Write the settings and one deployment into `folder`; InitError says what is wrong."""
    import tomllib

    if launch is not None and (url or reference_url):
        raise InitError("--launch and --url: give one (a command specgate starts, or servers someone else runs)")
    if (url is None) != (reference_url is None):
        raise InitError(
            "--url and --reference-url go together: the speculative server and the plain one it is compared with"
        )
    if url is None and model is not None:
        raise InitError("--model applies to --url only (with --launch it is the command's --model-path)")
    if launch is None and draft is not None:
        raise InitError("--draft applies to --launch only (the EAGLE-3 draft model for that command)")
    name = name or ("sim" if launch is None and url is None else "mine")
    if problem := safe_name_problem(name):
        raise InitError(f"--name: {problem}")
    out = Written()
    deployment_path = folder / "deployments" / f"{name}.toml"
    targets = [folder / SETTINGS_FILE, deployment_path]
    if not force and (existing := [str(p) for p in targets if p.exists()]):
        raise InitError(f"{', '.join(existing)} already exist(s); --force overwrites")
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file() and "[tool.specgate]" in pyproject.read_text(encoding="utf-8", errors="replace"):
        raise InitError(
            f"{pyproject} already has [tool.specgate]; edit it there (a specgate.toml would take precedence)"
        )
    if launch is None and url is None:
        text = (builtin_deployments_dir() / "sim.toml").read_text(encoding="utf-8")
        if name != "sim":
            text = text.replace('name = "sim"', f"name = {_toml_string(name)}", 1)
        out.notes.append(
            "the SIMULATOR: runs anywhere, figures are not SGLang's; `specgate init --launch CMD` for yours"
        )
    elif launch is not None:
        text, notes = launch_deployment(name, launch, draft)
        out.notes.extend(notes)
    else:
        if model is None:
            raise InitError("--url: give --model too (the model both servers serve, as it names it)")
        text = url_deployment(name, url, reference_url, model, out.notes)  # type: ignore[arg-type]
    # What is written must load: the same checks `specgate check` runs.
    try:
        loaded = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # a writer's bug, said as one, never a traceback
        raise InitError(f"the deployment init built for {deployment_path} is not TOML ({exc}); nothing was written") from None
    parse_deployment(loaded, deployment_path)
    deployment_path.parent.mkdir(parents=True, exist_ok=True)
    deployment_path.write_text(text, encoding="utf-8")
    out.files.append(deployment_path)
    settings = folder / SETTINGS_FILE
    simulator = launch is None and url is None
    settings.write_text(
        SETTINGS_TEXT.format(deployment=f"deployments/{name}.toml", gate=GATE_ON if simulator else GATE_OFF),
        encoding="utf-8",
    )
    out.files.append(settings)
    if (ignored := _ignore_report_folder(folder)) is not None:
        out.files.append(ignored)
    relative = f"deployments/{name}.toml"
    update = f"specgate baseline update {relative}"
    if simulator and name == "sim":
        out.files.extend(_copy_sim_baseline(folder / "baselines" / "sim"))
        out.next_steps += [
            "`specgate check` shows what would run",
            "`pytest` runs your tests and the gate on the SIMULATOR, compared with the baseline copied into baselines/sim",
        ]
    elif simulator:
        out.notes.append(f"no stored baseline copied (the simulator's is stored under the name sim) for {name!r}")
        out.next_steps += [
            f"`{update}` (committed tree) records the baseline in baselines/{name}/; commit it",
            "`pytest` then runs your tests and the gate, compared with it",
        ]
    else:
        where = "where the command runs (the GPU runner)" if launch is not None else "that reaches both servers"
        # A url deployment's servers run already: the update measures them, it starts nothing.
        servers = "boots the servers" if launch is not None else "measures the running servers (it starts none)"
        out.next_steps += [
            f"`specgate check {relative}` here: what would run, and what keeps it from booting on this host",
            f"on the host {where}, in this repository at a committed tree: `{update}` {servers}, runs "
            f"the gate and records the baseline in baselines/{name}/; commit that folder",
            f"then `specgate run {relative}` there gates each change against it (a plain `pytest` leaves the gate "
            "out: gate = false in specgate.toml)",
        ]
    return out


def _copy_sim_baseline(dest: Path) -> list[Path]:
    """The simulator's stored baseline as specgate records it: the same on every host (the
    simulator's fingerprint names no hardware), so the first run compares against it."""
    source = builtin_baselines_dir() / "sim"
    copied = []
    for path in shipped_baseline_files("sim"):
        target = dest / path.relative_to(source)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        copied.append(target)
    return copied
