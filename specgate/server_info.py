"""Reading what a server says about itself (`/get_server_info`) across SGLang releases.

Releases name fields differently and some nest the launch arguments under `server_args`; the
fingerprint of a stored baseline and the diagnosis both read through here, defensively: a field
the server did not report is None, never an error.
"""

from __future__ import annotations

from typing import Any


def lookup(info: dict[str, Any], *names: str) -> Any:
    """The first of `names` present, at the top level or under a nested `server_args`."""
    raw = info.get("server_args")
    nested: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for name in names:
        for source in (info, nested):
            if source.get(name) is not None:
                return source[name]
    return None
