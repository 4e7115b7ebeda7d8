"""What a run leaves for its CI beside the report folder: the step summary GitHub shows
($GITHUB_STEP_SUMMARY) and pytest's junit XML (--junitxml); both go out through the one masker
(secrets.py), as everything else specgate writes does. What specgate prints to a CI log goes
through the one escape of specgate/ci_log.py.

The junit XML is pytest's own file, written at its session end from every report it saw: a
failure's traceback (a server's 500 body echoing the Authorization header), captured output,
properties, collection and internal errors. It is masked once it is whole (`mask_junit_xml`,
from the plugin's unconfigure, which runs after every plugin's session end), element by element
through `redact`: masking pytest's report objects as they pass would miss what reaches the file
another way (session properties, another plugin's additions, whatever a later pytest adds) and
would change objects the terminal and other plugins read; masking the file's bytes would miss
shapes that XML escaping hides (`&quot;Authorization&quot;: &quot;Basic …`).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from specgate.secrets import redact

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
def append_step_summary(text: str) -> str | None:
    """Append `text` to the step summary where the variable names one; what went wrong, else None.

    Only a regular file (or a path where none is yet, made one) is written: opening a FIFO for
    writing waits for a reader that never comes, hanging the run after its report, and a device
    would take the text anywhere. O_NONBLOCK makes the open of a FIFO fail or return at once
    (the file's type is then read from what was opened, so nothing can be swapped in between)."""
    summary_file = os.environ.get(STEP_SUMMARY_ENV)
    if not summary_file:
        return None
    try:
        fd = os.open(summary_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO no process reads
            return f"${STEP_SUMMARY_ENV} ({summary_file}) NOT written: it is a FIFO, not a regular file"
        return f"${STEP_SUMMARY_ENV} ({summary_file}) NOT written: {exc}"
    with os.fdopen(fd, "w", encoding="utf-8") as summary:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return f"${STEP_SUMMARY_ENV} ({summary_file}) NOT written: it is not a regular file"
        try:
            summary.write(redact(text))
            summary.flush()
        except OSError as exc:
            return f"${STEP_SUMMARY_ENV} ({summary_file}) NOT written: {exc}"
    return None


def junit_path(option: str) -> Path:
    """The file pytest's junitxml plugin writes for `--junitxml=option` (it expands it so)."""
    return Path(os.path.normpath(os.path.abspath(os.path.expanduser(os.path.expandvars(option)))))


def _masked_tree(data: bytes) -> bytes:
    root = ET.fromstring(data)
    for element in root.iter():
        if element.text:
            element.text = redact(element.text)
        if element.tail:
            element.tail = redact(element.tail)
        for name, value in element.attrib.items():
            element.attrib[name] = redact(value)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def mask_junit_xml(path: Path) -> str | None:
    """Rewrite the junit XML at `path` with every credential masked (whole, through a rename);
    what went wrong, else None. A file that is not XML is masked as text."""
    target = path.resolve()  # a link named on the command line keeps pointing at the masked file
    try:
        if not target.is_file():
            return None  # pytest wrote none (an internal error, a usage error)
        data = target.read_bytes()
        try:
            masked = _masked_tree(data)
        except ET.ParseError:
            masked = redact(data.decode("utf-8", "replace")).encode()
        if masked == data:
            return None
        mode = stat.S_IMODE(target.stat().st_mode)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                os.fchmod(out.fileno(), mode)
                out.write(masked)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        return f"--junitxml ({path}) NOT masked: {exc}; it may hold credentials in clear"
    return None
