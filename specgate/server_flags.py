"""Which spelling of a server flag each SGLang release accepts, and the graph bound read back.

Evidence: results/2026-12-03-sglang-server-args-from-wheels/ (every release's own argparse and
ServerArgs fields, read from its wheel, 0.5.11 and 0.5.14-0.5.23). In short:

- the largest batch a decode CUDA graph covers is `--cuda-graph-max-bs` up to 0.5.11;
  `--cuda-graph-max-bs-decode` (or `--cuda-graph-config '{"decode":{"max_bs":N}}'`) from 0.5.14,
  where the old name is a deprecated alias, until 0.5.19; from 0.5.20 the old name is refused;
- prefill graphs are turned off by `--disable-piecewise-cuda-graph` up to 0.5.11; from 0.5.14 by
  `--cuda-graph-backend-prefill disabled`, the old flag an alias until 0.5.19, refused from 0.5.20;
- `/get_server_info` reports `cuda_graph_max_bs` up to 0.5.11; from 0.5.14 `cuda_graph_max_bs_decode`
  (None where the bound came from the JSON) and the resolved `cuda_graph_config.decode.max_bs`.

A release is compared as a tuple of ints ("0.5.15.post1" is (0, 5, 15, 1)). An unknown release is
None: the flags it is written with are then the old ones, which every release up to 0.5.19 takes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

Release = tuple[int, ...]

NEW_GRAPH_FLAGS_FROM: Release = (0, 5, 14)  # --cuda-graph-max-bs-decode, --cuda-graph-config, per-phase backends
OLD_GRAPH_FLAGS_UNTIL: Release = (0, 5, 19)  # the last release taking --cuda-graph-max-bs, --disable-piecewise-cuda-graph

OLD_BOUND, NEW_BOUND, GRAPH_CONFIG = "--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", "--cuda-graph-config"
GRAPH_BOUND_FLAGS = (OLD_BOUND, NEW_BOUND)  # one option, old and new names
OLD_PREFILL_OFF = "--disable-piecewise-cuda-graph"
NEW_PREFILL_OFF = ("--cuda-graph-backend-prefill", "disabled")
# The old spellings, and the releases that take them.
OLD_SPELLINGS = {OLD_BOUND: NEW_BOUND, OLD_PREFILL_OFF: " ".join(NEW_PREFILL_OFF)}

_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?")


def parse_release(text: str | None) -> Release | None:
    """The release in "0.5.14", "0.5.15.post1", "sglang==0.5.14", "0.5.14-specgate-sim"; else None."""
    match = _RELEASE.search(text or "")
    if not match:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


def accepts(release: Release | None, flag: str) -> bool:
    """Whether `release`'s parser takes `flag` (only the spellings named above are known)."""
    if flag in OLD_SPELLINGS:
        return release is None or release[:3] <= OLD_GRAPH_FLAGS_UNTIL
    if flag in (NEW_BOUND, GRAPH_CONFIG, NEW_PREFILL_OFF[0]):
        return release is not None and release[:3] >= NEW_GRAPH_FLAGS_FROM
    return True


def graph_bound_args(release: Release | None, bound: int) -> list[str]:
    """The flags that set the decode graph bound on `release`."""
    return [NEW_BOUND if accepts(release, NEW_BOUND) else OLD_BOUND, str(bound)]


def prefill_graphs_off_args(release: Release | None) -> list[str]:
    """The flags that turn prefill (piecewise) CUDA graphs off on `release`."""
    return list(NEW_PREFILL_OFF) if accepts(release, NEW_PREFILL_OFF[0]) else [OLD_PREFILL_OFF]


def refused_flags(release: Release | None, args: Sequence[str]) -> list[str]:
    """The graph flags in `args` that `release` does not take, each with what it takes instead."""
    out = []
    for arg in args:
        flag = arg.partition("=")[0]
        if flag.startswith("--") and not accepts(release, flag):
            instead = OLD_SPELLINGS.get(flag)
            out.append(f"{flag} (use {instead})" if instead else flag)
    return out


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
