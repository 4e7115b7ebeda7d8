"""What each SGLang release's server parser takes, and SGLang's own answer to a command line.

SGLang's `sglang serve` and `python -m sglang.launch_server` build one argparse parser from
`ServerArgs.add_cli_args` (`prepare_server_args`). Its answer to a flag depends on the release:
argparse takes an unambiguous prefix of a flag (`allow_abbrev`), so a flag renamed into two
(`--cuda-graph-max-bs` -> `--cuda-graph-max-bs-decode` / `-prefill`, 0.5.20 on) is refused as an
"ambiguous option", and a removed one as "unrecognized arguments".

Two ways to ask, in the order specgate uses them:
- the parser of the SGLang that a launch command's Python imports (`PROBE_SOURCE`, run by
  `specgate.preflight` in that Python; no model, no GPU): SGLang itself decides;
- where that SGLang cannot be imported here (a CPU CI runner, an ssh host, a url server), the
  release's table: every option of that release's parser, written by
  `tools/sglang_cli_tables.py` from the released wheel into `sglang_cli_tables/<release>.json`,
  rebuilt into an argparse parser here, so the refusal is argparse's own words.

This module imports nothing of specgate: the simulator (`--sim-release`) reads the same tables.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

Release = tuple[int, ...]

TABLES_DIR = Path(__file__).resolve().parent / "sglang_cli_tables"
# The releases specgate supports: its shipped deployments, levers and `init` write flags every one
# of them takes (tests/self/test_sglang_cli.py holds them to it). 0.5.11-0.5.13 are read too, for a
# deployment that declares one, but the graph flags of 0.5.14 on do not exist there.
SUPPORTED_FROM: Release = (0, 5, 14)

_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?")


def parse_release(text: str | None) -> Release | None:
    """The release in "0.5.14", "0.5.15.post1", "sglang==0.5.14", "0.5.14-specgate-sim"; else None."""
    match = _RELEASE.search(text or "")
    if not match:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


_DECLARED = re.compile(r"\d+\.\d+\.\d+(?:\.post\d+)?")


def declared_release(text: str) -> Release | None:
    """A release as a deployment declares it: exactly "0.5.23" or "0.5.15.post1" (not a pre-release,
    not a sentence with a release in it); None otherwise."""
    return parse_release(text) if _DECLARED.fullmatch(text.strip()) else None


def release_text(release: Release) -> str:
    head = ".".join(str(p) for p in release[:3])
    return head + (f".post{release[3]}" if len(release) > 3 else "")


@dataclass(frozen=True)
class Option:
    """One action of a release's parser."""

    flags: tuple[str, ...]
    dest: str
    nargs: int | str  # 0 for a switch, 1 for one value, or argparse's "?", "*", "+"
    value_type: str  # "int", "float" or "str" (any other converter is read as text)
    choices: tuple[str, ...] | None
    required: bool
    deprecated: str | None  # the flag that replaces it, where the release says so ("" where it names none)


class Refused(Exception):
    """What SGLang's parser says of a command line (argparse's error message)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Refused(message)


@dataclass(frozen=True)
class ReleaseTable:
    release: Release
    wheel: str
    allow_abbrev: bool
    options: tuple[Option, ...]

    @property
    def name(self) -> str:
        return release_text(self.release)

    def option(self, flag: str) -> Option | None:
        return self._by_flag.get(flag)

    def resolve(self, flag: str) -> tuple[str | None, Option | None]:
        """The full flag `flag` stands for, as argparse reads it: itself, or where abbreviations
        are allowed the one flag it is a prefix of; (None, None) where none or several are."""
        if flag in self._by_flag:
            return flag, self._by_flag[flag]
        if not self.allow_abbrev or not flag.startswith("--"):
            return None, None
        matches = [f for f in self._by_flag if f.startswith(flag)]
        return (matches[0], self._by_flag[matches[0]]) if len(matches) == 1 else (None, None)

    @functools.cached_property
    def _by_flag(self) -> dict[str, Option]:
        return {flag: option for option in self.options for flag in option.flags}

    @functools.cached_property
    def parser(self) -> argparse.ArgumentParser:
        return self._parser(whole_line=True)

    @functools.cached_property
    def partial_parser(self) -> argparse.ArgumentParser:
        return self._parser(whole_line=False)

    def _parser(self, whole_line: bool) -> argparse.ArgumentParser:
        parser = _Parser(prog="sglang serve", allow_abbrev=self.allow_abbrev, add_help=False)
        for option in self.options:
            kwargs: dict = {"dest": option.dest, "required": option.required and whole_line}
            if option.nargs == 0:
                kwargs["action"] = "store_true"
            else:
                if option.nargs != 1:
                    kwargs["nargs"] = option.nargs
                kwargs["type"] = {"int": int, "float": float}.get(option.value_type, str)
                if option.choices is not None:
                    kwargs["type"] = _choice_type(option)
                    kwargs["choices"] = option.choices
            parser.add_argument(*option.flags, **kwargs)
        return parser

    def refusal(self, argv: Sequence[str], whole_line: bool = True) -> str | None:
        """argparse's message where this release's parser refuses `argv` (as SGLang would at
        boot), None where it takes it. Not `whole_line`: a part of a command line (a url server's
        declared flags), of which no flag is required."""
        try:
            (self.parser if whole_line else self.partial_parser).parse_args(list(argv))
        except Refused as exc:
            return str(exc)
        return None

    def deprecated_in(self, argv: Sequence[str]) -> list[tuple[str, str]]:
        """(flag, what replaces it) for each deprecated flag `argv` gives that this release still takes."""
        out = []
        for flag in option_words(argv):
            _, option = self.resolve(flag)
            if option is not None and option.deprecated is not None:
                out.append((flag, pasteable(option.deprecated)))
        return out

    def abbreviated_in(self, argv: Sequence[str]) -> list[tuple[str, str]]:
        """(flag, the full flag SGLang reads it as) for each abbreviation `argv` gives."""
        out = []
        for flag in option_words(argv):
            full, _ = self.resolve(flag)
            if full is not None and full != flag:
                out.append((flag, full))
        return out


def _choice_type(option: Option):
    """Values compared as text, as the tables keep choices (SGLang's converters return the same)."""
    convert = {"int": int, "float": float}.get(option.value_type)

    def value(text: str) -> str:
        if convert is not None:
            try:
                return str(convert(text))
            except ValueError:
                return text
        return text

    value.__name__ = option.value_type
    return value


# The options SGLang renamed, under their first name: 0.5.14-0.5.19 take both spellings of each (the
# old one a deprecated alias), so a server booted with either is the same server.
_FIRST_SPELLING = {"--cuda-graph-max-bs-decode": ["--cuda-graph-max-bs"]}
_FIRST_SPELLING_OF_VALUE = {("--cuda-graph-backend-prefill", "disabled"): ["--disable-piecewise-cuda-graph"]}


def digest_spelling(argv: Sequence[str]) -> list[str]:
    """`argv` with each renamed option in its first spelling, for identifying what was booted."""
    out: list[str] = []
    words = list(argv)
    i = 0
    while i < len(words):
        flag, eq, value = words[i].partition("=")
        if not eq and i + 1 < len(words):
            value = words[i + 1]
        if (flag, value) in _FIRST_SPELLING_OF_VALUE:
            out += _FIRST_SPELLING_OF_VALUE[(flag, value)]
            i += 1 if eq else 2
            continue
        if flag in _FIRST_SPELLING:
            out += [_FIRST_SPELLING[flag][0] + (eq + value if eq else "")]
        else:
            out.append(words[i])
        i += 1
    return out


# Flags that change only how a server waits while it has no request, never what it computes nor
# how it runs one, left out of the launch digest so that adding one keeps stored baselines.
# --sleep-on-idle: the idle scheduler blocks on its request sockets (a zmq poll that a request
# ends at once) instead of spinning a host core; the server's requests run the same code. It
# matters to its NEIGHBOURS (servers side by side on one host, where a spinning idle scheduler
# takes host time the measured server's cycle needs), like launch.cpu_affinity, which is a
# setting of the host the run is measured on and no part of the digest either: a baseline
# recorded beside spinning neighbours is compared with a run beside quiet ones.
DIGEST_IGNORED = ("--sleep-on-idle",)


def digest_words(argv: Sequence[str]) -> list[str]:
    """`argv` as it identifies what was booted: the DIGEST_IGNORED flags left out (each a switch,
    taking no value), each renamed option in its first spelling."""
    return digest_spelling([arg for arg in argv if arg.partition("=")[0] not in DIGEST_IGNORED])


def option_words(argv: Sequence[str]) -> list[str]:
    """The flags a command line gives (`--flag V` and `--flag=V` alike), in order."""
    return [arg.partition("=")[0] for arg in argv if arg.startswith("--")]


def _read(path: Path) -> ReleaseTable:
    raw = json.loads(path.read_text())
    options = tuple(
        Option(
            flags=tuple(a["flags"]),
            dest=a["dest"],
            nargs=a["nargs"],
            value_type=a.get("type", "str"),
            choices=tuple(a["choices"]) if a.get("choices") else None,
            required=bool(a.get("required")),
            deprecated=(a["deprecated"] if isinstance(a.get("deprecated"), str) else "")
            if a.get("deprecated")
            else None,
        )
        for a in raw["actions"]
    )
    release = parse_release(raw["release"])
    assert release is not None, path
    return ReleaseTable(release, raw.get("wheel", ""), bool(raw.get("allow_abbrev", True)), options)


@functools.cache
def tables() -> tuple[ReleaseTable, ...]:
    """Every release's table, oldest first."""
    return tuple(sorted((_read(p) for p in TABLES_DIR.glob("*.json")), key=lambda t: t.release))


def supported() -> tuple[ReleaseTable, ...]:
    return tuple(t for t in tables() if t.release >= SUPPORTED_FROM)


def newest() -> ReleaseTable:
    return tables()[-1]


def table_for(release: Release | None) -> ReleaseTable | None:
    """The table of `release`: its own, else the newest one before it of the same minor release
    (a post release reads as its release), else None (older than any table, another minor release,
    or unknown)."""
    if release is None:
        return None
    before = [t for t in tables() if t.release <= release and t.release[:2] == release[:2]]
    return before[-1] if before else None


def replacement(flag: str) -> str | None:
    """What replaces `flag` where some release marked it deprecated (`--cuda-graph-max-bs` ->
    `--cuda-graph-max-bs-decode`), read from the newest release that still took it, as SGLang words it."""
    for table in reversed(tables()):
        option = table.option(flag)
        if option is not None and option.deprecated:
            return option.deprecated
    return None


_MESSAGE_FLAG = (
    re.compile(r"^ambiguous option: (\S+?)(?:=\S*)? could match"),
    re.compile(r"^unrecognized arguments: (\S+)"),
    re.compile(r"^argument ([^:\s]+):"),
)


def first_refused_flag(message: str, argv: Sequence[str]) -> str | None:
    """The flag of `argv` that argparse's `message` is about, where one can be told: the flag it
    opens with (not one it lists as a possible match)."""
    given = option_words(argv)
    for pattern in _MESSAGE_FLAG:
        match = pattern.match(message)
        if match:
            named = match.group(1).split("/")  # "argument --model-path/--model: ..." names every alias
            return next((f for f in given if f in named), named[0])
    return None


def without(argv: Sequence[str], flag: str) -> list[str]:
    """`argv` less every occurrence of `flag` and the values after it (up to the next flag)."""
    out, dropping = [], False
    for arg in argv:
        if arg.startswith("--"):
            dropping = arg.partition("=")[0] == flag
            if dropping:
                continue
        elif dropping:
            continue
        out.append(arg)
    return out


def pasteable(advice: str) -> str:
    """SGLang's deprecation words in a form a shell takes: "--cuda-graph-backend-{decode,prefill}=disabled"
    -> "--cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled"."""
    match = re.fullmatch(r"(--[\w-]*)\{([\w,-]+)\}([\w-]*)(?:=(\S+))?", advice.strip())
    if not match:
        return advice.replace("=", " ", 1) if advice.startswith("--") and "=" in advice else advice
    head, parts, tail, value = match.groups()
    return " ".join(f"{head}{p}{tail}" + (f" {value}" if value else "") for p in parts.split(","))


# Run by the launch command's own Python (which need not have specgate): SGLang's parser, built as
# prepare_server_args builds it, asked about each command line read from stdin (a JSON list of
# argv lists). It prints one JSON object: the release, and per command line argparse's message or null.
PROBE_SOURCE = r'''
import argparse, json, sys
try:
    import sglang
    from sglang.srt.server_args import ServerArgs
except BaseException as exc:
    print(json.dumps({"imported": False, "why": f"{type(exc).__name__}: {exc}"[:300]}))
    raise SystemExit(0)

class Refused(Exception):
    pass

class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Refused(message)

answers = []
for argv in json.loads(sys.stdin.read()):
    parser = Parser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    try:
        parser.parse_args(argv)
        answers.append(None)
    except Refused as exc:
        answers.append(str(exc))
    except SystemExit as exc:
        answers.append(f"the parser exited ({exc.code})")
release = getattr(sglang, "__version__", None)
if release is None:
    try:
        from sglang.version import __version__ as release
    except BaseException:
        release = None
print(json.dumps({"imported": True, "release": release, "answers": answers}))
'''
