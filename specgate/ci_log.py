"""The one escape for what reaches a CI log. GitHub's runner reads any stdout line that starts
(after white space) with `::` as a workflow command, and `##[` anywhere as an old-style one, so a
server's log tail holding `::stop-commands::x` would switch off specgate's annotations and forge
others on the pull request. Every stdout and stderr write goes through `neutralise`
(secrets.MaskedStream); specgate's own workflow commands alone go out through
`write_workflow_commands`, their values masked and escaped by `workflow_value`.
"""

from __future__ import annotations

import re
import sys

from specgate.secrets import redact

# Where a line (or a write, which may begin one) starts with `::` after white space, any the
# runner trims (.NET's TrimStart: Unicode white space, \v, \f and no-break spaces too).
_COMMAND_START = re.compile(r"(^|\n)(\s*)(?=::)")
# What no runner reads as a command, in front of a line that would be one: visible, one quote level.
NEUTRALISED = "> "


def neutralise(text: str) -> str:
    """`text` (server output, user data, anything not specgate's own workflow command) as no CI
    runner reads as a command: a line starting with `::` gets NEUTRALISED in front, and `##[`
    becomes `# #[`. Every write is treated as if it began a line: two streams (pytest's terminal
    writer and sys.stdout) share one terminal, so neither knows where the other left its line."""
    return _COMMAND_START.sub(rf"\1\2{NEUTRALISED}", text).replace("##[", "# #[")


def workflow_value(text: str) -> str:
    """A workflow command's message, masked, then %, CR and LF escaped as the runner expects, so
    that no quoted text (a server's reply in a gate's summary) can end the command or start
    another. Masked first: a key's URL-encoded form, escaped again, no longer reads as it."""
    return redact(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: str) -> str:
    """A property value of a workflow command (a title): also ':' and ',' escaped."""
    return workflow_value(text).replace(":", "%3A").replace(",", "%2C")


def write_workflow_commands(lines: list[str]) -> None:
    """specgate's own workflow commands (`::error title=…::…`, built with workflow_value and
    workflow_property) to stdout: masked, but not neutralised as every other line is."""
    out = sys.stdout
    write = getattr(out, "write_command", None)
    for line in lines:
        if write is not None:
            write(line + "\n")
        else:
            out.write(redact(line) + "\n")
    out.flush()
