"""Typed reads from a parsed TOML table, with errors that name file and field.

tomllib gives plain dicts; this wraps one table so that each read states the type
it expects, unknown keys are caught (a typo such as `max_new_token` must not be
silently ignored), and every error carries the dotted field path.

Inside `recording()` every read also notes what it reads (the table, the key, its type,
default, bounds and choices): the parser then describes the format it accepts, and
specgate.schema turns those notes into a JSON Schema. One definition, the parser, instead
of a second description kept in step with it by hand.
"""

from __future__ import annotations

import codecs
import difflib
import math
import re
import stat
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar, overload

from specgate.errors import DeploymentError

_MISSING: Any = object()
# table pattern ("", "launch.", "configs.*.", "gates.beats[*].") -> key ("*" in a table of
# names) -> what was read there; "*names*" marks a table whose keys are the user's names.
Notes = dict[str, dict[str, dict[str, Any]]]
_NOTES: ContextVar[Notes | None] = ContextVar("specgate_tomlcheck_notes", default=None)
NAMES = "*names*"


@contextmanager
def recording() -> Iterator[Notes]:
    """Every Table read inside the block notes what it read, into the dict yielded."""
    notes: Notes = {}
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)
# A read's default is returned as given where the key is absent (None, a tuple, a number...).
D = TypeVar("D")
# Names become file names (baselines, golden files, server logs): one path component,
# no separators, no `..`, nothing a shell or a file system treats specially.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def safe_name_problem(name: str) -> str | None:
    """Why `name` cannot be used as a file name, or None where it can."""
    if not SAFE_NAME.fullmatch(name) or ".." in name:
        return (
            f"{name!r} is not a safe name: it becomes a file name, so use letters, digits, '-', '_' and '.' "
            "(starting with a letter or digit, no '..', at most 100 characters)"
        )
    return None


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file (a deployment, specgate.toml), every way it can fail to be one named: a folder or
    a FIFO given for the file (a FIFO is never opened: reading it would wait for a writer), a UTF-8
    byte-order mark (which TOML forbids and tomllib reports as "Invalid statement"), a NUL byte, text
    that is not UTF-8, and TOML's own errors. DeploymentError names the file."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise DeploymentError(path, None, f"cannot be read: {exc}") from None
    if stat.S_ISDIR(mode):
        raise DeploymentError(path, None, "is a directory, not a TOML file")
    if not stat.S_ISREG(mode):
        raise DeploymentError(
            path, None, "is not a regular file (a FIFO, socket or device), so no TOML file: nothing was read from it"
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DeploymentError(path, None, f"cannot be read: {exc}") from None
    if raw.startswith(codecs.BOM_UTF8):
        raise DeploymentError(
            path, None, "starts with a byte-order mark (UTF-8 BOM, bytes EF BB BF), which TOML does not allow: "
            "save it as UTF-8 without BOM"
        )  # fmt: skip
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DeploymentError(
            path, None, f"is not UTF-8 text (TOML files must be UTF-8; save it as UTF-8): {exc}"
        ) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise DeploymentError(path, None, f"holds a NUL byte (line {line}): not TOML text; the file is damaged or binary")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeploymentError(path, None, f"not valid TOML: {exc}") from None
    except RecursionError:
        # tomllib parses arrays and inline tables recursively: a few thousand nested levels
        # exhaust Python's stack long before any syntax error could be reported.
        raise DeploymentError(
            path, None, "is nested too deeply (arrays or inline tables inside each other thousands of levels "
            "deep): no deployment or settings file nests more than a few levels"
        ) from None  # fmt: skip


def nul_problem(value: str) -> str | None:
    """A NUL character (TOML's "\\u0000") ends a C string: no path, command argument or
    environment value can hold one, and Python refuses it deep inside os calls."""
    if "\x00" in value:
        return f"{value!r} holds a NUL character (\\u0000), which no path, argument or environment value can hold"
    return None


class Table:
    def __init__(self, data: dict[str, Any], path: Path, prefix: str = "", pattern: str | None = None) -> None:
        self._data = data
        self._path = path
        self._prefix = prefix
        self._pattern = prefix if pattern is None else pattern  # the prefix with names and indices as "*"
        self._read: set[str] = set()

    def _note(self, key: str, kind: str, default: Any, **facts: Any) -> str:
        """Record a read (inside `recording()`); returns the key's pattern ("*" in a table of names)."""
        notes = _NOTES.get()
        if notes is None:
            return key
        table = notes.setdefault(self._pattern, {})
        slot = "*" if NAMES in table else key
        entry = table.setdefault(slot, {"kind": kind})
        if default is _MISSING:
            entry["required"] = True
        elif facts.get("derived") is None:  # a derived default varies by file: described, not given
            entry.setdefault("default", default)
        for fact, value in facts.items():
            if value is not None:
                entry.setdefault(fact, value)
        return slot

    def names(self, safe: bool = False) -> list[str]:
        """The keys of a table whose keys are the user's names ([configs.NAME], an env table);
        `safe`: names that become file names (checked by the caller with safe_name_problem)."""
        notes = _NOTES.get()
        if notes is not None:
            notes.setdefault(self._pattern, {})[NAMES] = {"kind": "names", "safe": safe}
        return list(self._data)

    def field(self, key: str) -> str:
        return f"{self._prefix}{key}"

    def error(self, key: str | None, problem: str) -> DeploymentError:
        return DeploymentError(self._path, self.field(key) if key else self._prefix.rstrip(".") or None, problem)

    def keys(self) -> list[str]:
        return list(self._data)

    def _get(self, key: str, default: Any) -> Any:
        self._read.add(key)
        if key in self._data:
            return self._data[key]
        if default is _MISSING:
            # A misspelt required key fails here, before the unknown keys are looked at: say it now.
            unread = [k for k in self._data if k not in self._read]
            near = difflib.get_close_matches(key, unread, n=1, cutoff=0.75)
            hint = f" (the table has {near[0]!r}: misspelt?)" if near else ""
            raise self.error(key, "is required but missing" + hint)
        return default

    @overload
    def text(self, key: str, *, choices: tuple[str, ...] | None = None) -> str: ...
    @overload
    def text(self, key: str, default: D, choices: tuple[str, ...] | None = None) -> str | D: ...
    def text(self, key: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None) -> Any:
        self._note(key, "string", default, choices=choices)
        value = self._get(key, default)
        if value is default and key not in self._data:
            return value
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {type(value).__name__} {value!r}")
        if problem := nul_problem(value):
            raise self.error(key, problem)
        if choices is not None and value not in choices:
            raise self.error(key, f"expected one of {', '.join(choices)}; got {value!r}")
        return value

    @overload
    def flag(self, key: str) -> bool: ...
    @overload
    def flag(self, key: str, default: D) -> bool | D: ...
    def flag(self, key: str, default: Any = _MISSING) -> Any:
        self._note(key, "boolean", default)
        value = self._get(key, default)
        if key in self._data and not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    @overload
    def name(self, key: str) -> str: ...
    @overload
    def name(self, key: str, default: D) -> str | D: ...
    def name(self, key: str, default: Any = _MISSING) -> Any:
        """A string that becomes part of a file name."""
        self._note(key, "name", default)
        value = self.text(key, default)
        if key in self._data and (problem := safe_name_problem(value)):
            raise self.error(key, problem)
        return value

    @overload
    def integer(self, key: str, *, minimum: int | None = None, maximum: int | None = None) -> int: ...
    @overload
    def integer(
        self, key: str, default: D, minimum: int | None = None, maximum: int | None = None, derived: str | None = None
    ) -> int | D: ...
    def integer(
        self,
        key: str,
        default: Any = _MISSING,
        minimum: int | None = None,
        maximum: int | None = None,
        derived: str | None = None,  # a default computed from other fields, in words (it varies by file)
    ) -> Any:
        self._note(key, "integer", default, minimum=minimum, maximum=maximum, derived=derived)
        value = self._get(key, default)
        if key not in self._data:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"expected an integer >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"expected an integer <= {maximum}, got {value}")
        return value

    @overload
    def number(self, key: str, *, minimum: float | None = None, maximum: float | None = None) -> float: ...
    @overload
    def number(
        self, key: str, default: D, minimum: float | None = None, maximum: float | None = None
    ) -> float | D: ...
    def number(
        self, key: str, default: Any = _MISSING, minimum: float | None = None, maximum: float | None = None
    ) -> Any:
        self._note(key, "number", default, minimum=minimum, maximum=maximum)
        value = self._get(key, default)
        if key not in self._data:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {value!r}")
        if not math.isfinite(value):
            # nan compares false with every bound, so it would pass them all (and turn a
            # confidence into a point interval, or a timeout into forever).
            raise self.error(key, f"expected a finite number, got {value}")
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            bounds = [f">= {minimum:g}"] if minimum is not None else []
            bounds += [f"<= {maximum:g}"] if maximum is not None else []
            raise self.error(key, f"expected a number {' and '.join(bounds)}, got {value:g}")
        return float(value)

    @overload
    def str_list(self, key: str, *, choices: tuple[str, ...] | None = None) -> list[str]: ...
    @overload
    def str_list(
        self, key: str, default: D, choices: tuple[str, ...] | None = None, derived: str | None = None
    ) -> list[str] | D: ...
    def str_list(
        self, key: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None, derived: str | None = None
    ) -> Any:
        """`choices` are the values the caller accepts (it checks them, with its own message)."""
        self._note(key, "string list", default, choices=choices, derived=derived)
        value = self._get(key, default)
        if key not in self._data:
            return value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"expected a list of strings, got {value!r}")
        for i, item in enumerate(value):
            if problem := nul_problem(item):
                raise self.error(f"{key}[{i}]", problem)
        return list(value)

    @overload
    def int_list(self, key: str, *, minimum: int = 1, maximum: int | None = None) -> list[int]: ...
    @overload
    def int_list(
        self, key: str, default: D, minimum: int = 1, maximum: int | None = None, derived: str | None = None
    ) -> list[int] | D: ...
    def int_list(
        self, key: str, default: Any = _MISSING, minimum: int = 1, maximum: int | None = None, derived: str | None = None
    ) -> Any:
        self._note(key, "integer list", default, minimum=minimum, maximum=maximum, derived=derived)
        value = self._get(key, default)
        if key not in self._data:
            return value
        if (
            not isinstance(value, list)
            or not value
            or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= minimum and (maximum is None or v <= maximum)
                for v in value
            )
        ):
            bound = f">= {minimum}" + (f" and <= {maximum}" if maximum is not None else "")
            raise self.error(key, f"expected a non-empty list of integers {bound}, got {value!r}")
        # Each list is a set of settings (concurrencies, sweep axes): a value twice would plan its
        # gates or points twice, which the gate kinds refuse as their own bug, naming no field.
        twice = sorted({v for v in value if value.count(v) > 1})
        if twice:
            raise self.error(key, f"lists {', '.join(map(str, twice))} more than once, in {value!r}: give each once")
        return list(value)

    def token_counts(self, key: str, default: list[int], minimum: int, maximum: int, meaning: str = "") -> list[int]:
        """A sorted list of distinct token counts, each an integer or a string "NK" (K = 1024
        tokens, the unit context lengths are quoted in), between `minimum` and `maximum`;
        `meaning`: what they are, for the JSON Schema's description."""
        self._note(key, "token count list", default, minimum=minimum, maximum=maximum, meaning=meaning or None)
        value = self._get(key, default)
        if key not in self._data:
            return list(value)
        expected = f'a list of token counts, each an integer or a string like "8K" (K = 1024), from {minimum} to {maximum}'
        if not isinstance(value, list):
            raise self.error(key, f"expected {expected}, got {value!r}")
        counts: list[int] = []
        for i, item in enumerate(value):
            count = _token_count(item)
            if count is None or not minimum <= count <= maximum:
                raise self.error(f"{key}[{i}]", f"expected {expected}, got {item!r}")
            counts.append(count)
        if counts != sorted(set(counts)):
            raise self.error(key, f"expected distinct token counts in increasing order, got {value!r}")
        return counts

    def str_map(self, key: str, keys: tuple[str, ...] | None = None) -> dict[str, str]:
        """`keys`: the only keys the caller accepts (it checks them, with its own message)."""
        self._note(key, "string map", {}, keys=keys)
        value = self._get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self.error(key, f"expected a table of string values, got {value!r}")
        for name, item in value.items():
            if problem := nul_problem(name) or nul_problem(item):
                raise self.error(key, problem)
        return dict(value)

    def env_map(self, key: str) -> dict[str, str]:
        """An environment table: string values under names a process environment can hold."""
        value = self.str_map(key)
        for name in value:
            self.check_env_name(key, name)
        return value

    def check_env_name(self, key: str, name: str) -> None:
        """Refuse `name` (an entry of the table under `key`) that no process environment can hold."""
        if not name or "=" in name:
            raise self.error(key, f"{name!r} cannot name an environment variable (empty, or holds '=')")

    def table(self, key: str, required: bool = False) -> Table:
        slot = self._note(key, "table", _MISSING if required else {})
        value = self._get(key, _MISSING if required else {})
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table ([{self.field(key)}]), got {value!r}")
        child = f"{self._pattern}{slot}."
        if (notes := _NOTES.get()) is not None:
            notes.setdefault(child, {})  # opened, even where nothing in it is read (an empty table)
        return Table(value, self._path, f"{self.field(key)}.", child)

    def table_list(self, key: str) -> list[Table]:
        slot = self._note(key, "table list", [])
        value = self._get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.error(key, f"expected an array of tables ([[{self.field(key)}]]), got {value!r}")
        return [Table(v, self._path, f"{self.field(key)}[{i}].", f"{self._pattern}{slot}[*].") for i, v in enumerate(value)]

    def skip(self, *keys: str) -> None:
        """Keys checked elsewhere or not at all (a section left unchecked because one it needs
        is broken): not reported as unknown."""
        self._read.update(keys)

    def reject_unknown(self) -> None:
        """Fail on keys nobody read: in a gate config a typo must never pass silently."""
        for problem in self.unknown_problems():
            raise problem

    def unknown_problems(self) -> list[DeploymentError]:
        """One error per key nobody read, each with its nearest known field (for a parser that
        lists every problem of its table at once)."""
        out = []
        for key in self._data:
            if key not in self._read:
                close = difflib.get_close_matches(key, sorted(self._read), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f"; known fields: {', '.join(sorted(self._read))}"
                out.append(self.error(key, f"unknown field{hint}"))
        return out


_TOKEN_COUNT = re.compile(r"^([0-9]+)([kK]?)$")


def _token_count(item: Any) -> int | None:
    """An integer, or a string "N" / "NK" (K = 1024) as a count of tokens; None otherwise."""
    if isinstance(item, int) and not isinstance(item, bool):
        return item
    if isinstance(item, str) and (m := _TOKEN_COUNT.match(item.strip())):
        return int(m.group(1)) * (1024 if m.group(2) else 1)
    return None
