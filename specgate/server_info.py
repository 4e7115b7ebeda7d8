"""Reading what a server says about itself (`/get_server_info`) across SGLang releases.

Releases name fields differently and some nest the launch arguments under `server_args`; the
fingerprint of a stored baseline and the diagnosis both read through here, defensively: a field
the server did not report is None, never an error.
"""

from __future__ import annotations

from typing import Any

from specgate.server_flags import decode_graph_config


def lookup(info: dict[str, Any], *names: str) -> Any:
    """The first of `names` present, at the top level or under a nested `server_args`."""
    raw = info.get("server_args")
    nested: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for name in names:
        for source in (info, nested):
            if source.get(name) is not None:
                return source[name]
    return None


# How specgate's simulator reports itself: its /get_server_info version is "<release>-specgate-sim"
# (specgate/sim/server.py), whatever deployment reached it (a --launch of its command, a url).
SIMULATOR_VERSION_MARK = "-specgate-sim"


def simulated(server_infos: dict[str, dict[str, Any]]) -> dict[str, str]:
    """{server: the version it reports} of the servers that report themselves as the simulator."""
    out = {}
    for name, info in server_infos.items():
        version = info.get("version") if isinstance(info, dict) else None
        if isinstance(version, str) and version.endswith(SIMULATOR_VERSION_MARK):
            out[name] = version
    return out


def graph_bound(info: dict[str, Any]) -> int | None:
    """The largest batch a decode CUDA graph covers, as the server reports it, in any release's
    names (specgate/server_flags.py): 0.5.14 on, the resolved `cuda_graph_config.decode` (`bs`, the
    sizes captured, else `max_bs`) or `cuda_graph_max_bs_decode` / `cuda_graph_bs_decode`; up to
    0.5.11 `cuda_graph_max_bs` / `cuda_graph_bs`. None where the server does not say."""
    decode = decode_graph_config(lookup(info, "cuda_graph_config"))
    sizes = decode.get("bs") or lookup(info, "cuda_graph_bs_decode", "cuda_graph_bs")
    if isinstance(sizes, list):
        captured = [s for s in (_int(x) for x in sizes) if s is not None]
        if captured:
            return max(captured)
    return _int(decode.get("max_bs")) or _int(lookup(info, "cuda_graph_max_bs_decode", "cuda_graph_max_bs"))


def decode_graphs_disabled(info: dict[str, Any]) -> bool | None:
    """Whether decode runs without CUDA graphs: `disable_cuda_graph` (every release), or from
    0.5.14 the resolved `cuda_graph_config.decode.backend` "disabled" (`--disable-decode-cuda-graph`,
    `--cuda-graph-backend-decode disabled`), whatever the legacy flag says."""
    if decode_graph_config(lookup(info, "cuda_graph_config")).get("backend") == "disabled":
        return True
    if as_bool(lookup(info, "disable_decode_cuda_graph")):
        return True
    return as_bool(lookup(info, "disable_cuda_graph"))


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def as_bool(value: Any) -> bool | None:
    """A server-info flag as SGLang spells it across releases (bool, 0/1, "true"), None where absent."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)
