"""Keys that must never be printed: a server's API key (named by `launch.api_key_env`, read from
the environment) and passwords in server URLs. Everything specgate writes or shows that could
hold one (commands, server logs it keeps, curl reproducers, reports) goes through `redact`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from specgate.errors import SpecgateError

MASK = "***"
# A password in a URL: everything between "user:" and the last "@" of the authority.
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]+):[^/\s]*@")
# Whatever a log or a command gives as the key, however it is quoted or escaped.
_KEY_FIELD = re.compile(r"""(api[_-]key['"]?\s*[=:]\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s,)]+)""", re.IGNORECASE)
MIN_KEY_LENGTH = 12
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_name_problem(name: str) -> str | None:
    return None if _ENV_NAME.fullmatch(name) else "is not an environment variable name (letters, digits, _)"


def api_key(env_name: str | None) -> str | None:
    """The key in the variable the deployment names; an error where it is unset or empty."""
    if env_name is None:
        return None
    value = os.environ.get(env_name, "")
    if not value.strip():
        raise SpecgateError(
            f"launch.api_key_env names {env_name}, which is not set (or empty) in this environment: "
            f"export the servers' API key as {env_name}"
        )
    if len(value) < MIN_KEY_LENGTH:
        # Masking a short key masks every place its letters occur, and the masks spell it out.
        raise SpecgateError(f"the key in {env_name} is shorter than {MIN_KEY_LENGTH} characters: too short to mask safely")
    return value


def key_to_mask(env_name: str | None) -> str | None:
    """The key where it can be read, else None: what a launcher masks in what it shows. An unset
    or unusable key is reported where the key is used (api_key), not by every display of a log."""
    try:
        return api_key(env_name)
    except SpecgateError:
        return None


def _forms(secret: str) -> list[str]:
    """The key as written, and as Python's repr and JSON escape it (SGLang logs both)."""
    import json

    return list(dict.fromkeys([secret, repr(secret)[1:-1], json.dumps(secret)[1:-1]]))


def redact(text: str, *secrets: str | None) -> str:
    for secret in secrets:
        if secret:
            for form in _forms(secret):
                text = text.replace(form, MASK)
    if any(secrets):
        text = _KEY_FIELD.sub(rf"\1{MASK}", text)
    return _URL_PASSWORD.sub(rf"\1:{MASK}@", text)


def copy_masked(stream, log_path: Path, secret: str) -> None:  # noqa: ANN001 - a binary pipe
    """The server's output, line by line, into its log without the key (runs until EOF)."""
    with stream, log_path.open("ab", buffering=0) as log:
        for raw in iter(stream.readline, b""):
            log.write(redact(raw.decode("utf-8", "replace"), secret).encode())


def redact_file(path: Path, *secrets: str | None) -> None:
    """Rewrite a kept server log without the key (SGLang prints its server_args, key included)."""
    if not any(secrets):
        return
    try:
        data = path.read_bytes()
    except OSError:
        return
    cleaned = redact(data.decode("utf-8", "replace"), *secrets).encode()
    if cleaned != data:
        path.write_bytes(cleaned)
