"""Whether a server attached by url is the server its config declares.

specgate did not start it, so nothing but its own `/get_server_info` says what it runs: two urls
swapped (the plain server under the speculative config's name) would otherwise be measured and
judged as declared, and pass. Each setting the config's launch arguments declare and the server
reports is compared; one the server does not report is "not checked", said once, never assumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specgate.deployment import Deployment, ServerConfig, expand_placeholders, flag_value
from specgate.sglang_cli import parse_release

# (what it is called, its flags, its /get_server_info names across releases, compared as numbers)
CHECKED: tuple[tuple[str, tuple[str, ...], tuple[str, ...], bool], ...] = (
    ("speculative_algorithm", ("--speculative-algorithm",), ("speculative_algorithm",), False),
    ("num_steps", ("--speculative-num-steps",), ("speculative_num_steps",), True),
    ("topk", ("--speculative-eagle-topk",), ("speculative_eagle_topk", "speculative_topk"), True),
    ("num_draft_tokens", ("--speculative-num-draft-tokens",), ("speculative_num_draft_tokens",), True),
    ("attention_mode", ("--speculative-attention-mode",), ("speculative_attention_mode",), False),
    ("model_path", ("--model-path", "--model"), ("model_path",), False),
)


# SGLang switches --speculative-attention-mode to decode by itself in a few cases (model overrides,
# some KV-cache layouts and attention backends) from 0.5.17 on, and /server_info then reports the
# switched value: a declared "prefill" served as "decode" is that server, not another one.
SWITCHES_MODE_FROM = (0, 5, 17)


@dataclass(frozen=True)
class ServedCheck:
    mismatches: list[str]  # "field: declared X, served Y"
    not_checked: list[str]  # declared settings the server does not report
    notes: tuple[str, ...] = ()  # differences accepted, each saying why

    def failure(self, config: str, url: str, path: object) -> str | None:
        """The config's failure, naming every setting that differs; None where none does."""
        if not self.mismatches:
            return None
        return (
            f"config {config!r}: the server at {url} is not the one its config declares ("
            + "; ".join(self.mismatches)
            + f", per its /get_server_info; configs.{config}.args and launch.args in {path}): check that the url "
            "points at this config's server"
        )

    def note(self) -> str:
        """The settings left unchecked and the differences accepted, said once (the boot's note)."""
        parts = list(self.notes)
        if self.not_checked:
            parts.append(
                f"not checked against /get_server_info (the server does not report them): {', '.join(self.not_checked)}"
            )
        return "; ".join(parts)


def _reported(info: dict[str, Any], names: tuple[str, ...]) -> tuple[bool, Any]:
    """(whether the server reports any of `names`, its value): a name present with null is
    reported (SGLang says `speculative_algorithm: null` for a plain server), an absent one is not."""
    raw = info.get("server_args")
    nested: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for name in names:
        for source in (info, nested):
            if name in source:
                return True, source[name]
    return False, None


def _same(declared: str | None, served: Any, numeric: bool) -> bool:
    if declared is None or served is None:
        return declared is None and served is None
    if numeric:
        try:
            return int(declared) == int(served)
        except (TypeError, ValueError):
            return False
    return str(declared).strip().lower() == str(served).strip().lower()


def check_served(deployment: Deployment, config: ServerConfig, info: dict[str, Any]) -> ServedCheck:
    """Compare what `config` declares (launch.args, then its own args: the last value wins, as in
    SGLang's parser) with what the server reports in `info`."""
    args = tuple(deployment.launch.args) + tuple(config.args)
    mismatches, not_checked, notes = [], [], []
    for field, flags, names, numeric in CHECKED:
        declared = flag_value(args, *flags)
        if declared is not None and "{model}" in declared:
            declared = expand_placeholders(declared, {"model": deployment.model})
        if declared is not None and "{" in declared:
            continue  # {repo} or {python}: a path this client cannot spell as the server's host does
        if declared is None and field != "speculative_algorithm":
            continue  # left to SGLang's default: nothing declared to compare
        present, served = _reported(info, names)
        if not present:
            if declared is not None:
                not_checked.append(field)
            continue
        if field == "attention_mode" and _switched_by_sglang(declared, served, info):
            notes.append(
                f"speculative_attention_mode: declared {declared!r}, served 'decode': SGLang switches it to decode "
                "by itself in some cases (0.5.17 on), so this is the declared server; its verify runs in decode mode"
            )
            continue
        if not _same(declared, served, numeric):
            said = "none (plain decoding)" if declared is None else repr(declared)
            shown = "none (plain decoding)" if served is None and field == "speculative_algorithm" else repr(served)
            mismatches.append(f"{field}: declared {said}, served {shown}")
    return ServedCheck(mismatches, not_checked, tuple(notes))


def _switched_by_sglang(declared: str | None, served: Any, info: dict[str, Any]) -> bool:
    """A declared prefill mode served as decode by a release that switches it by itself (or one
    that does not say its release)."""
    if str(declared).strip().lower() != "prefill" or str(served).strip().lower() != "decode":
        return False
    release = parse_release(str(info.get("version") or ""))
    return release is None or release >= SWITCHES_MODE_FROM
