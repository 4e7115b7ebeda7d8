"""Which spelling of a server flag to write for an SGLang release, and the graph bound read back.

What each release's parser takes is read from its table (`specgate/sglang_cli.py`, built from the
released wheels by `tools/sglang_cli_tables.py`). In short:

- the largest batch a decode CUDA graph covers is `--cuda-graph-max-bs` up to 0.5.13;
  `--cuda-graph-max-bs-decode` (or `--cuda-graph-config '{"decode":{"max_bs":N}}'`) from 0.5.14,
  where the old name is a deprecated alias until 0.5.19; from 0.5.20 the old name is refused as
  an ambiguous prefix of `--cuda-graph-max-bs-decode` and `--cuda-graph-max-bs-prefill`;
- prefill graphs are turned off by `--disable-piecewise-cuda-graph` up to 0.5.13; from 0.5.14 by
  `--cuda-graph-backend-prefill disabled`, the old flag an alias until 0.5.19, refused from 0.5.20;
- `/get_server_info` reports `cuda_graph_max_bs` up to 0.5.13; from 0.5.14 `cuda_graph_max_bs_decode`
  (None where the bound came from the JSON) and the resolved `cuda_graph_config.decode.max_bs`.

A flag written for no release in particular (None: the server's release is not known) is the
spelling every supported release takes (0.5.14 to the newest table).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from specgate.sglang_cli import (
    SUPPORTED_FROM,
    Release,
    ReleaseTable,
    parse_release,
    pasteable,
    replacement,
    supported,
    table_for,
    tables,
)

__all__ = [
    "parse_release", "accepts", "graph_bound_args", "prefill_graphs_off_args", "graph_bound_from_args",
    "supported_spelling",
]  # fmt: skip

OLD_BOUND, NEW_BOUND, GRAPH_CONFIG = "--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", "--cuda-graph-config"
GRAPH_BOUND_FLAGS = (OLD_BOUND, NEW_BOUND)  # one option, old and new names
OLD_PREFILL_OFF = "--disable-piecewise-cuda-graph"
NEW_PREFILL_OFF = ("--cuda-graph-backend-prefill", "disabled")


def accepts(release: Release | None, flag: str) -> bool:
    """Whether `release`'s parser has `flag` under that exact name (None: every supported release
    has it). A release specgate has no table for is read as the newest table before it."""
    if release is None:
        return all(t.option(flag) is not None for t in supported())
    table = table_for(release)
    return table is not None and table.option(flag) is not None


def graph_bound_args(release: Release | None, bound: int) -> list[str]:
    """The flags that set the decode graph bound on `release`."""
    return [NEW_BOUND if accepts(release, NEW_BOUND) else OLD_BOUND, str(bound)]


def prefill_graphs_off_args(release: Release | None) -> list[str]:
    """The flags that turn prefill (piecewise) CUDA graphs off on `release`."""
    return list(NEW_PREFILL_OFF) if accepts(release, NEW_PREFILL_OFF[0]) else [OLD_PREFILL_OFF]


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _last_value(args: Sequence[str], *flags: str) -> str | None:
    """The last value given to any of `flags` (`--flag V` or `--flag=V`), as SGLang's parser keeps."""
    value = None
    for i, arg in enumerate(args):
        for flag in flags:
            if arg == flag and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(flag + "="):
                value = arg[len(flag) + 1 :]
    return value


def decode_graph_config(config: Any) -> dict[str, Any]:
    """The `decode` part of a `cuda_graph_config`, given as JSON text or as the dict the server reports."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return {}
    decode = config.get("decode") if isinstance(config, dict) else None
    return decode if isinstance(decode, dict) else {}


def graph_bound_from_args(args: Sequence[str]) -> int | None:
    """The decode graph bound a command line asks for, in any release's spelling. As SGLang resolves
    it: `--cuda-graph-config`'s decode.max_bs wins; then the last of the two flags given (one option,
    two names)."""
    from_json = _int(decode_graph_config(_last_value(args, GRAPH_CONFIG)).get("max_bs"))
    if from_json is not None:
        return from_json
    return _int(_last_value(args, *GRAPH_BOUND_FLAGS))


def _releases_where(test: Callable[[ReleaseTable], bool]) -> str:
    names = [t.name for t in supported() if test(t)]
    if not names:
        return ""
    return names[0] if len(names) == 1 else f"{names[0]}-{names[-1]}"


def supported_spelling(group: Sequence[str]) -> tuple[list[str], str | None]:
    """A flag as a command line gives it (`--flag`, `--flag V`, `--flag=V`), rewritten into the
    spelling every supported release takes where one exists, with a note saying why; a flag that
    only some supported release refuses or deprecates and has no such spelling keeps its words, noted."""
    words = list(group)
    flag, eq, inline = words[0].partition("=")
    values = [inline] if eq else words[1:]
    full = next((f for t in reversed(supported()) if (f := t.resolve(flag)[0]) is not None), flag)
    if full != flag and all(t.option(full) is not None for t in supported()):
        # An abbreviation SGLang reads as its flag: written in full, as specgate reads flags.
        rewritten = [full, *values]
        return rewritten, f"wrote {' '.join(words)} as {' '.join(rewritten)}: {flag} abbreviates {full}"
    missing = _releases_where(lambda t: t.resolve(flag)[1] is None)
    old = _releases_where(lambda t: (o := t.resolve(flag)[1]) is not None and o.deprecated is not None)
    if not missing and not old:
        return words, None
    why = (f"refused by SGLang {missing}" if missing else "") + (", " if missing and old else "") + (
        f"deprecated in {old}" if old else ""
    )
    instead = replacement(flag)
    if not instead or "{" in instead or not accepts(None, instead.partition("=")[0]):
        return words, f"{flag} is {why}" + (f": SGLang says to use {pasteable(instead)}" if instead else "")
    new_flag, new_eq, new_value = instead.partition("=")
    if new_eq and values:
        return words, f"{flag} is {why}: SGLang says to use {instead}"  # a value where SGLang's word has one too
    rewritten = [new_flag, new_value] if new_eq else [new_flag, *values]
    older = [t.name for t in tables() if t.release < SUPPORTED_FROM and t.option(new_flag) is None]
    before = (
        f"; {older[0]}-{older[-1]} take only the old name: for a server that old, keep {flag} and declare "
        'launch.sglang_release (e.g. "0.5.13")'
        if older
        else ""
    )
    return rewritten, f"wrote {' '.join(words)} as {' '.join(rewritten)}: {flag} is {why}{before}"
