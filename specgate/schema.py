"""A JSON Schema of the deployment file, written by the parser itself.

`specgate.tomlcheck.recording()` notes every typed read the deployment parser makes; parsing
the built-in deployments plus a few sketches that reach the branches none of them takes (the
url and ssh launchers, a sweep, per-config tolerances) therefore lists every field the parser
knows, with its type, default, bounds and choices. This module turns those notes into a JSON
Schema (draft 2020-12) for editors and CI (`check-jsonschema --schemafile
docs/deployment.schema.json my.toml` reads TOML). The parser stays the authority: it checks
what a schema cannot (names that must exist under [configs], flags a launcher owns, gates
that cannot fail), and its errors keep naming the file, field and fix.
"""

from __future__ import annotations

import json
from copy import deepcopy
from typing import Any

from specgate.tomlcheck import NAMES, SAFE_NAME, Notes, recording

SCHEMA_ID = "https://specgate.invalid/deployment.schema.json"

# Branches no built-in deployment takes, sketched onto the simulator's deployment (each is
# parsed for the notes of its branch's reads).
def _url_launcher(data: dict[str, Any]) -> dict[str, Any]:
    urls = {name: {"url": f"http://127.0.0.1:{30000 + i}"} for i, name in enumerate(data["configs"])}
    return {"launch": {"launcher": "url", "api_key_env": "SPECGATE_API_KEY"}, "configs": urls}


def _ssh_launcher(data: dict[str, Any]) -> dict[str, Any]:
    return {"launch": {"launcher": "ssh", "ssh": {"hosts": ["gpu-1"], "python": "/opt/venv/bin/python"}}}


def _sweep_and_tolerances(data: dict[str, Any]) -> dict[str, Any]:
    speculative = next(n for n, c in data["configs"].items() if "--speculative-algorithm" in c.get("args", []))
    return {
        "sweep": {"base": speculative, "draft_tokens": [4], "env": {"SGLANG_X": ["1"]}, "gpus": ["0"]},
        "gates": {
            "tolerance": {"decode_tps_by_config": {speculative: 0.2}},
            "between_boot": {"decode_tps": 0.1, "speedup": 0.1, "source": "a calibration"},
        },
    }


def _gate_kinds(data: dict[str, Any]) -> dict[str, Any]:
    """One entry of every declared gate kind, from the kind's own example (specgate.gate_kinds)."""
    from specgate.gate_kinds import declared_kinds

    speculative = next(n for n, c in data["configs"].items() if "--speculative-algorithm" in c.get("args", []))
    names = {"speculative": speculative, "reference": data.get("reference", "baseline")}
    fill = lambda v: v.format(**names) if isinstance(v, str) else v  # noqa: E731
    return {
        "gates": {
            kind.table: [{key: fill(value) for key, value in kind.example.items()}]
            for kind in declared_kinds()
            if kind.table is not None and kind.example is not None
        }
    }


_SKETCHES = (_url_launcher, _ssh_launcher, _sweep_and_tolerances, _gate_kinds)

_TYPES: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "name": {"type": "string", "pattern": f"^{SAFE_NAME.pattern}$"},  # the parser also refuses ".."
    "boolean": {"type": "boolean"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "string list": {"type": "array", "items": {"type": "string"}},
    "integer list": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    "token count list": {
        "type": "array",
        "items": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+[kK]?$"}]},
    },
    "string map": {"type": "object", "additionalProperties": {"type": "string"}},
}


def _merge(into: dict[str, dict], more: dict[str, dict], complete: bool, seen_complete: bool) -> None:
    """Add one parse's notes of a table. A field is required only if every complete parse that
    opened the table required it (`launch.ssh` is required only when `launcher = "ssh"`), in
    whatever order the parses come; a parse that stopped at an error says nothing of the fields
    it never reached. `seen_complete`: an earlier complete parse opened this table."""
    for key in set(into) | set(more):
        if key not in more:
            if complete:
                into[key].pop("required", None)
        elif key not in into:
            into[key] = dict(more[key])
            if seen_complete:
                into[key].pop("required", None)  # a complete parse opened the table without it
        elif not more[key].get("required"):
            into[key].pop("required", None)


def record_deployment_reads() -> Notes:
    """The parser's notes over every built-in deployment and the sketches above."""
    import tomllib

    from specgate.deployment import parse_deployment
    from specgate.errors import DeploymentError, DeploymentErrors
    from specgate.resources import builtin_deployments_dir

    notes: Notes = {}
    seen_complete: set[str] = set()  # table patterns a complete parse opened
    files = sorted(builtin_deployments_dir().glob("*.toml"))
    sim = next(f for f in files if f.stem == "sim")
    documents = [(f, tomllib.loads(f.read_text())) for f in files]
    for sketch in _SKETCHES:
        data = tomllib.loads(sim.read_text())
        documents.append((sim, _overlay(data, sketch(data))))
    for path, data in documents:
        complete = True
        with recording() as once:
            try:
                parse_deployment(data, path)
            except (DeploymentError, DeploymentErrors):
                complete = False  # a sketch only needs to reach its branch's reads
        for pattern, table in once.items():
            _merge(notes.setdefault(pattern, {}), table, complete, pattern in seen_complete)
            if complete:
                seen_complete.add(pattern)
    return notes


def _overlay(base: dict, sketch: dict) -> dict:
    out = deepcopy(base)
    for key, value in sketch.items():
        out[key] = _overlay(out.get(key, {}), value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _leaf(entry: dict[str, Any]) -> dict[str, Any]:
    schema = dict(_TYPES[entry["kind"]])
    if "choices" in entry and entry["kind"] == "string list":
        schema["items"] = {"type": "string", "enum": list(entry["choices"])}
    elif "choices" in entry:
        schema["enum"] = list(entry["choices"])
    if "keys" in entry:  # a string map with known keys only
        schema["propertyNames"] = {"enum": list(entry["keys"])}
    bounds = ("minimum", "maximum")
    if entry["kind"] == "integer list":
        schema["items"] = {"type": "integer", **{b: entry[b] for b in bounds if b in entry}}
    elif entry["kind"] == "token count list":  # bounds hold for the integer a "K" string stands for
        schema["description"] = (
            f"{entry.get('meaning', 'token counts')}: each an integer or a string like \"8K\" (K = 1024), from "
            f"{entry['minimum']} to {entry['maximum']}, in increasing order"
        )
    else:
        schema.update({b: entry[b] for b in bounds if b in entry})
    if "derived" in entry:
        schema["description"] = f"default: {entry['derived']}"
    if entry.get("default") is not None:
        schema["default"] = json.loads(json.dumps(entry["default"]))  # tuples become lists
    return schema


def _object(pattern: str, notes: Notes) -> dict[str, Any]:
    table = notes.get(pattern, {})
    if NAMES in table:
        entry = table.get("*")
        inner = _node(pattern, "*", entry, notes) if entry else {}
        names: dict[str, Any] = {"type": "object", "additionalProperties": inner}
        if table[NAMES].get("safe"):
            names["propertyNames"] = dict(_TYPES["name"])
        return names
    properties = {key: _node(pattern, key, entry, notes) for key, entry in sorted(table.items())}
    required = sorted(key for key, entry in table.items() if entry.get("required"))
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def _node(pattern: str, key: str, entry: dict[str, Any], notes: Notes) -> dict[str, Any]:
    if entry["kind"] == "table":
        return _object(f"{pattern}{key}.", notes)
    if entry["kind"] == "table list":
        return {"type": "array", "items": _object(f"{pattern}{key}[*].", notes)}
    return _leaf(entry)


def deployment_schema() -> dict[str, Any]:
    root = _object("", record_deployment_reads())
    # Required where the parser always asks; a field required only inside a branch (ssh.hosts)
    # sits in that branch's table, which is itself optional.
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "specgate deployment file",
        "description": "Generated by `specgate schema` from the deployment parser's own reads; the parser checks more "
        "(cross-references, owned flags, gates that cannot fail). See README.md, 'Pointing it at real SGLang'.",
        **root,
    }


