"""Server-supplied text made visible before a person reads it: report.md, the terminal.

A server's answers, error bodies, log lines and settings reach the report as they came. A NUL, a
right-to-left override (U+202E) or another bidi control, a C0 or C1 control character or an ANSI
escape shows nothing, or rewrites what is around it: an answer could read as the baseline's while
it is not, a log line could clear the terminal. Each is written as its escape (\\x00, \\u202e), which
reads as what it is; tab and newline stay. report.json keeps the raw strings (machines read them).
"""

from __future__ import annotations

import re

# C0 but tab and newline, DEL and C1, zero-width and directional marks, line and paragraph
# separators, the bidi embeddings, overrides and isolates, invisible operators, BOM, annotations.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every invisible or reordering character written as its escape."""
    return _INVISIBLE.sub(_escaped, text)
