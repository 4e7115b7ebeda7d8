"""Stored documents read through pydantic models: one definition says what a document holds,
checks it on reading, and keeps this project's error form (the dotted field, what was
expected, what was found), so a corrupt file is named as precisely as a bad deployment field.

pydantic v2 rather than msgspec: it generates JSON Schema from the same models (the deployment
file's schema is the next step), and its error locations map directly onto dotted fields. The
documents migrate one at a time behind their existing self-tests: the calibration record, the
sweep state, the stored baseline, golden answers and report.json (specgate.report.model) so far.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import AfterValidator, BeforeValidator, ValidationError

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotARegularFile(OSError):
    """A document's path names something else: reading a FIFO blocks until someone writes to it
    (the run would hang at the gates), a device may never end. An OSError, so that every reader's
    "cannot be read" handling names it with its own file and field."""

    def __init__(self, path: Path, kind: str, expected: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file: expected {expected}")
        self.filename = str(path)

    def __str__(self) -> str:
        return str(self.args[0])


def read_document(path: Path, expected: str) -> str:
    """The UTF-8 text of the regular file `path` (symlinks followed), or NotARegularFile naming it
    and `expected` (what should be there, e.g. "a stored baseline (JSON)"). The file is opened
    without blocking and checked on the open descriptor, so nothing can swap a FIFO in between."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(mode)), "not a file")
        raise NotARegularFile(path, kind, expected)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as f:
        return f.read().decode("utf-8")


class NestedTooDeeply(json.JSONDecodeError):
    """JSON nested deeper than Python's stack allows: json.loads recurses once per level and a few
    thousand `[` end in a RecursionError traceback. A JSONDecodeError, so that every reader's
    "not valid JSON" handling names it with its own file, as NotARegularFile does for OSError."""

    def __init__(self, text: str) -> None:
        super().__init__("nested too deeply (arrays or objects inside each other thousands of levels deep)", text, 0)

    def __str__(self) -> str:
        return str(self.msg)


def parse_json(text: str | bytes) -> Any:
    """json.loads, with a document nested too deeply raised as NestedTooDeeply (a JSONDecodeError):
    a stored file's, or a server's answer."""
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeeply(text.decode("utf-8", "replace") if isinstance(text, bytes) else text) from None


def read_json(path: Path, expected: str) -> Any:
    """The JSON document in the regular file `path` (read_document, then parse_json)."""
    return parse_json(read_document(path, expected))


def content_digest(value: Any) -> str:
    """The sha256 of a JSON value in one spelling (keys sorted, no spaces): what a stored document
    records of part of itself, so that a hand edit of that part is found on reading. It proves no
    more than that: whoever edits and recomputes it passes (docs/baselines.md says what else holds)."""
    spelled = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(spelled.encode()).hexdigest()


# pydantic's error types, in the words this project's other errors use.
_EXPECTED = {
    "missing": "is required but missing",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_type": "expected true or false",
    "string_type": "expected a string",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "string_too_short": "expected a non-empty string",
    "string_pattern_mismatch": "expected a string of another form",
    "string_unicode": "expected text (valid Unicode)",
}


def meaning(expected: str, ok: Callable[[Any], bool], *, before: bool = False) -> AfterValidator | BeforeValidator:
    """A rule whose failure reads in this project's words ("expected <expected>, got <value>"),
    not in pydantic's ("String should match pattern ..."); `before`: checked on the raw JSON value."""

    def check(value: Any) -> Any:
        if not ok(value):
            raise ValueError(f"expected {expected}, got {repr(value)[:80]}")
        return value

    return BeforeValidator(check) if before else AfterValidator(check)


_UNION_TAG = re.compile(r"[a-z][a-z0-9-]*\[.*\]")


def problem(exc: ValidationError, at: str = "") -> str:
    """The first error of `exc` as "field 'a.b.c': expected ..., got ..."; `at` is where the
    validated object sits in its document (e.g. "points[3]")."""
    err = exc.errors()[0]
    field = at
    for part in err["loc"]:  # a list index as [i], a key as .key: the form the other documents' errors use
        if isinstance(part, str) and _UNION_TAG.fullmatch(part):
            continue  # pydantic's name for the branch of a union it tried ("str-enum[RunVerdict]"): no field
        field += f"[{part}]" if isinstance(part, int) else f".{part}" if field else str(part)
    field = field or "(the document)"
    ctx = err.get("ctx") or {}
    kind = err["type"]
    if kind == "greater_than_equal":
        what = f"expected at least {ctx.get('ge')}"
    elif kind == "greater_than":
        what = f"expected more than {ctx.get('gt')}"
    elif kind == "less_than_equal":
        what = f"expected at most {ctx.get('le')}"
    elif kind == "too_short":
        what = f"expected at least {ctx.get('min_length')} entr{'y' if ctx.get('min_length') == 1 else 'ies'}"
    elif kind in ("literal_error", "enum"):
        what = f"expected {ctx.get('expected')}"
    elif kind == "value_error":
        what = str(ctx.get("error") or err["msg"])
    else:
        what = _EXPECTED.get(kind, err["msg"])
    # A validator's own message already says what it got.
    got = "" if kind in ("missing", "value_error") else f", got {repr(err.get('input'))[:80]}"
    if kind == "missing" and isinstance(err.get("input"), dict) and err["loc"]:
        # A misspelt key reads as a missing one: name the key that is there instead.
        close = difflib.get_close_matches(str(err["loc"][-1]), [str(k) for k in err["input"]], n=1, cutoff=0.75)
        if close:
            got = f" (did you mean it for the key {close[0]!r}, which is there?)"
    return f"field '{field}': {what}{got}"
