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
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]+):[^@\s/]+@")
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
    return value


def redact(text: str, *secrets: str | None) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return _URL_PASSWORD.sub(rf"\1:{MASK}@", text)


def redact_file(path: Path, *secrets: str | None) -> None:
    """Rewrite a kept server log without the key (SGLang prints its server_args, key included)."""
    if not any(secrets):
        return
    try:
        data = path.read_bytes()
    except OSError:
        return
    cleaned = data
    for secret in secrets:
        if secret:
            cleaned = cleaned.replace(secret.encode(), MASK.encode())
    if cleaned != data:
        path.write_bytes(cleaned)
